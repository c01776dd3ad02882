"""The API an RL framework wraps: one job's worker on Loom.

    job = Job("math-7b", role="driver")          # endpoint and keys from LOOM_* by default
    with job.phase("rollout") as p:              # blocks until Loom grants the rollout
        responses = generate(batch)
        job.progress(len(responses), batch_size)
    @job.phase("training")
    def train_step(responses): ...
    job.finish()                                 # the job is complete: it leaves its group

With no endpoint (LOOM_ENDPOINT unset and none given) every call returns at once and phases
run unscheduled, so one framework image runs with or without Loom.
"""

import functools
import logging
import os
import socket
import time

from . import loom_pb2 as pb
from .client import Client, LoomError

_JOB_STATES = {v: k for k, v in pb.JobState.items()}


class Hop:
    """One receiver of a sync's weights and the data address it pulls them from."""

    def __init__(self, worker, address, source):
        self.worker, self.address, self.source = worker, address, source


class Grant:
    """A run permit (WEAVE §5.1): the GPUs the phase runs on and the load before it, the
    iteration (of the job's placement, from 1) Loom counts it in, and, for rollout and sync
    permits, the route of the job's weights (WEAVE §5.2) over the workers that registered a
    data address (loom_client.weights moves them along it).

    `profiling`: WEAVE's one-shot profiling pass (§5 (1)), granted once to a job submitted with
    `profile = true`: run the phase at the job's maximum token limit and keep nothing it
    changes; it is no iteration. Its measured time and the phase's `host_memory_gb` place
    the job afterwards."""

    def __init__(self, phase, gpus=0, switch_s=0.0, cold=False, iteration=0, sync_route=(),
                 devices=None, profiling=False):
        self.phase = phase
        self.gpus = gpus
        self.switch_s = switch_s
        self.cold = cold
        self.iteration = iteration
        self.sync_route = list(sync_route)
        # node id -> device indices the phase runs on (CUDA_VISIBLE_DEVICES order on the node)
        self.devices = dict(devices or {})
        self.profiling = profiling

    def source_of(self, worker):
        """Where `worker` pulls the weights from, or None when the route does not reach it."""
        return next((h.source for h in self.sync_route if h.worker == worker), None)

    def trainer(self):
        """The trainer's data address: the source no receiver serves (the route's root)."""
        served = {h.address for h in self.sync_route}
        return next((h.source for h in self.sync_route if h.source not in served), None)


def _devices(nodes):
    """A grant's or tail migration's NodeDevices as {node: [device, ...]}."""
    return {n.node: list(n.devices) for n in nodes}


class Phase:
    """One phase, held while its `with` block runs; released when the block ends without an
    exception, with the block's duration as its solo time unless `solo_s` is set. As a
    decorator, it holds the phase around every call of the function. A permit is the job's,
    not the worker's: where several workers share a phase (rollout workers), each acquires it
    and one ends it; the others pass `release=False`. Set `host_memory_gb` inside the block
    to report what the phase's state holds in host DRAM until its next turn (per node)."""

    def __init__(self, job, name, solo_s=None, release=True):
        self._job = job
        self.name = name
        self.solo_s = solo_s
        self.release = release
        self.host_memory_gb = 0.0
        self.grant = None
        self._since = None

    def __enter__(self):
        self.grant = self._job._acquire(self.name)
        self._since = time.monotonic()
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None and self.release:
            held = time.monotonic() - self._since
            self._job._release(self.name, held if self.solo_s is None else self.solo_s,
                               self.host_memory_gb)
        return False

    def refresh(self):
        """Asks again for the standing permit: the answer is the grant as of now (its sync
        route then covers workers that registered since)."""
        self.grant = self._job._acquire(self.name)
        return self.grant

    @property
    def gpus(self):
        return self.grant.gpus if self.grant else 0

    @property
    def iteration(self):
        return self.grant.iteration if self.grant else 0

    @property
    def devices(self):
        """{node: [device, ...]} the phase runs on (its grant's)."""
        return self.grant.devices if self.grant else {}

    @property
    def profiling(self):
        """The grant is the job's profiling pass (see Grant)."""
        return bool(self.grant and self.grant.profiling)

    def __call__(self, fn):
        @functools.wraps(fn)
        def held(*args, **kwargs):
            with Phase(self._job, self.name, self.solo_s, self.release):
                return fn(*args, **kwargs)

        return held


class Job:
    """A worker of one RL job. Roles: "driver" runs every phase (a single controller, as veRL
    and slime drive), "rollout" the rollouts, "train" the training and the sync after it.

    Arguments default to the environment: LOOM_ENDPOINT, LOOM_SERVER_KEY (the service's
    public key file), LOOM_KEY (this worker's key pair prefix), LOOM_JOB, LOOM_ROLE,
    LOOM_WORKER_ID, LOOM_OUTAGE_LIMIT_S (how long to wait through a service outage; unset:
    as long as it lasts). Without an endpoint the job is disabled: every call is a no-op.
    `data_address`: this worker's data channel, where a sync's weights are served or pulled
    (the trainer's and each rollout worker's; Grant.sync_route is built from them)."""

    def __init__(self, job=None, role=None, worker_id=None, endpoint=None, server_key=None,
                 key=None, node="", timeout_s=30.0, outage_limit_s=None, data_address=""):
        env = os.environ
        self.name = job or env.get("LOOM_JOB", "")
        self.role = role or env.get("LOOM_ROLE", "driver")
        endpoint = endpoint if endpoint is not None else env.get("LOOM_ENDPOINT", "")
        self.enabled = bool(endpoint)
        self.worker_id = ""
        self.devices = {}  # node id -> device indices of the phase granted last
        self._tail = []
        self._left = []
        self._waiting = []
        self.client = None
        if not self.enabled:
            return
        if not self.name:
            raise ValueError("a job name is needed (job= or LOOM_JOB)")
        worker_id = worker_id or env.get("LOOM_WORKER_ID") or (
            f"{self.name}-{self.role}-{socket.gethostname()}-{os.getpid()}")
        if outage_limit_s is None and env.get("LOOM_OUTAGE_LIMIT_S"):
            outage_limit_s = float(env["LOOM_OUTAGE_LIMIT_S"])
        self.client = Client(endpoint, server_key or env.get("LOOM_SERVER_KEY"),
                             key or env.get("LOOM_KEY"), timeout_s, outage_limit_s)
        self.client.on_command(self._command)
        self.worker_id = worker_id
        self.registration = self.client.register(self.role, worker_id, self.name, node,
                                                 data_address=data_address)

    # -- phases ---------------------------------------------------------------------------------

    def phase(self, name, solo_s=None, release=True):
        """A context manager (and decorator) holding the phase: rollout, training or sync."""
        return Phase(self, name, solo_s, release)

    def _acquire(self, name):
        if not self.enabled:
            return Grant(name)
        g = self.client.acquire(self.name, name)
        route = [Hop(h.worker, h.address, h.source) for h in g.sync_route]
        self.devices = _devices(g.devices)
        return Grant(name, g.gpus, g.switch_s, g.cold, g.iteration, route, self.devices,
                     g.profiling)

    def _release(self, name, solo_s, host_memory_gb=0.0):
        if not self.enabled:
            return
        try:
            self.client.release(self.name, name, solo_s, host_memory_gb)
        except LoomError as e:
            # The phase ended, but the service could not store its progress (a full or failing
            # disk): the protocol says go on to the next phase; a restart before the store
            # takes writes again answers that one RESTART_ITERATION.
            if e.code != pb.ERROR_READ_ONLY:
                raise
            logging.getLogger("loom_client").warning("%s %s release not stored: %s",
                                                     self.name, name, e.message)

    def staged(self):
        """The job's state is in host DRAM (WEAVE §5.1 Init); its first phase says so too."""
        if self.enabled:
            self.client.staged(self.name)

    def progress(self, done, total):
        """Rollout responses done out of total: drives long-tail migration (WEAVE §4.3)."""
        if self.enabled:
            self.client.progress(self.name, done, total)

    # -- what the service says ------------------------------------------------------------------

    def on_tail_migration(self, fn):
        """fn(gpus): the running rollout now has this many GPUs (its tail was consolidated, or
        it grew as GPUs freed up; `devices` names them). Runs on the client's I/O thread."""
        self._tail.append(fn)
        return fn

    def on_job_left(self, fn):
        """fn(state, reason): the job left its group, state "JOB_STATE_FINISHED", ... or
        "JOB_STATE_DRIFTED", "JOB_STATE_MOVED" or "JOB_STATE_PROFILED" (placed again elsewhere: its
        phases go on there)."""
        self._left.append(fn)
        return fn

    def on_waiting(self, fn):
        """fn(phase, reason): why a phase this worker asked for is not granted yet."""
        self._waiting.append(fn)
        return fn

    def _command(self, env):
        body = env.WhichOneof("body")
        if body == "tail_migration":
            self.devices = _devices(env.tail_migration.devices)
            for fn in self._tail:
                fn(env.tail_migration.gpus)
        elif body == "job_left":
            for fn in self._left:
                fn(_JOB_STATES.get(env.job_left.state, ""), env.job_left.reason)
        elif body == "waiting":
            phase = pb.Phase.Name(env.waiting.phase).replace("PHASE_", "").lower()
            for fn in self._waiting:
                fn(phase, env.waiting.reason)

    # -- the end --------------------------------------------------------------------------------

    def finish(self):
        """The job is complete: it leaves its group, and this worker says goodbye."""
        self.close("job finished", finished=True)

    def close(self, reason="done", finished=False, failed=False):
        """Says goodbye; `finished`: the job is complete (it leaves its group); `failed`: the
        job crashed in this worker (it fails alone at once, not when the worker's silence
        is noticed)."""
        if self.client is not None:
            self.client.close(reason, job_finished=finished, job_failed=failed)
            self.client = None
            self.enabled = False

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        self.close("done" if kind is None else f"{kind.__name__}: {value}")
        return False
