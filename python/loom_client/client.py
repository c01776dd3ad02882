"""The raw loom.v1 client: one DEALER socket owned by one I/O thread.

The I/O thread sends what callers queue, files replies by request id, sends heartbeats at the
service's rate and hands commands to callbacks (or a queue for next_command). When the service
goes away (ServiceStopping, or a restarted service that no longer knows the session) it
registers again under the same worker id from the same process, and sends again what was in
flight of PhaseAcquire (nothing ran yet), Staged and PhaseRelease. A release names its grant's
iteration: the service acknowledges one whose iteration end it already counted, and any other
fails with Restarted (run the iteration again from its rollout, where the restarted service
resumes it). Any other request in flight fails with Restarted too.
"""

import collections
import itertools
import os
import sys
import threading
import time

import zmq

from . import loom_pb2 as pb

PROTOCOL_VERSION = 1

ROLES = {
    "driver": pb.ROLE_DRIVER,
    "rollout": pb.ROLE_ROLLOUT,
    "train": pb.ROLE_TRAIN,
    "gen-instance": pb.ROLE_GEN_INSTANCE,
    "collective-shim": pb.ROLE_COLLECTIVE_SHIM,
    "ocs-agent": pb.ROLE_OCS_AGENT,
    "admin": pb.ROLE_ADMIN,
    "gen-router": pb.ROLE_GEN_ROUTER,
}
PHASES = {"rollout": pb.PHASE_ROLLOUT, "training": pb.PHASE_TRAINING, "sync": pb.PHASE_SYNC}

_REGISTER_RETRY_S = 0.5
# Requests sent again to the next service (see above); the service takes an engine's finished
# requests and a router's step start once however often they come.
_SENT_AGAIN = ("phase_acquire", "phase_release", "staged", "requests_finished", "step_start")
_REGISTER_PATIENCE_S = 3.0
_wake_ids = itertools.count()
_HANDSHAKE_OK = zmq.EVENT_HANDSHAKE_SUCCEEDED


class LoomError(Exception):
    """The service answered with a typed error (loom.v1.Error)."""

    def __init__(self, code, message):
        super().__init__(f"{pb.ErrorCode.Name(code)}: {message}")
        self.code = code
        self.message = message


class Restarted(LoomError):
    """The service restarted (or the job was placed again) under this phase: run the job's
    iteration again from its rollout."""


class JobEnded(LoomError):
    """The job finished, failed, was cancelled or rejected: stop."""


def error_of(code, message):
    if code == pb.ERROR_RESTART_ITERATION:
        return Restarted(code, message)
    if code == pb.ERROR_JOB_ENDED:
        return JobEnded(code, message)
    return LoomError(code, message)


def read_key(path):
    with open(path) as f:
        return f.read().strip()


def _error_reply(rid, code, message):
    env = pb.Envelope()
    env.version = PROTOCOL_VERSION
    env.request_id = rid
    env.error.code = code
    env.error.message = message
    return env


class Client:
    """Thread-safe: any thread may call. `endpoint` is the service's gateway, or several,
    comma-separated, for the replicas of a service with [ha] (the client follows its leader).
    `timeout_s` bounds calls other than acquire (which
    waits for its turn as long as it takes unless given a timeout); None: no bound. Once
    registered, a call waits through an outage of the service (a restart, a link down) for at
    most `outage_limit_s` (None: as long as it lasts) and counts its timeout from when the
    service is back, so a worker outlives a restart however long it takes."""

    def __init__(self, endpoint, server_key=None, key=None, timeout_s=30.0,
                 outage_limit_s=None):
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 200)
        self._sock.setsockopt(zmq.RECONNECT_IVL, 100)
        self._sock.setsockopt(zmq.RECONNECT_IVL_MAX, 5000)
        if server_key:
            self._sock.curve_serverkey = read_key(server_key).encode()
            self._sock.curve_publickey = read_key(key + ".pub").encode()
            self._sock.curve_secretkey = read_key(key + ".secret").encode()
        endpoints = [e.strip() for e in endpoint.split(",") if e.strip()]
        if len(endpoints) > 1:
            # The replicas of a service with [ha]: only the leader listens, so frames go to
            # the connection that is up, and a new leader's endpoint is retried often.
            self._sock.setsockopt(zmq.IMMEDIATE, 1)
            self._sock.setsockopt(zmq.RECONNECT_IVL_MAX, 500)
        for e in endpoints:
            self._sock.connect(e)
        self._endpoint = endpoint
        self._links = 0  # endpoints connected now (the leader's alone, with [ha])
        # Callers wake the I/O thread through an inproc pair (sockets are not thread-safe).
        address = f"inproc://loom-client-wake-{os.getpid()}-{next(_wake_ids)}"
        self._wake_rx = self._ctx.socket(zmq.PAIR)
        self._wake_rx.bind(address)
        self._wake_tx = self._ctx.socket(zmq.PAIR)
        self._wake_tx.connect(address)
        self._timeout_s = timeout_s
        self._outage_limit_s = outage_limit_s
        # The link to the service, from the socket's monitor: since when it is down (None while
        # up), and when it last came back.
        self._monitor = self._sock.get_monitor_socket(
            zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED | _HANDSHAKE_OK
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        self._curve = bool(server_key)
        self._ever_connected = False   # what the handshakes said, for link_diagnosis()
        self._handshake_ok = False
        self._refused = False
        self._outage_since = None
        self._back_at = 0.0
        self._incarnation = os.urandom(8).hex()
        self._cond = threading.Condition()
        self._pending = {}          # request id -> [request envelope, reply or None]
        self._grants = {}           # (job, phase) -> its last PhaseGrant, named by its release
        self._outbox = []
        self._commands = collections.deque()
        self._callbacks = []
        self._registration = None
        self._heartbeat_ms = 2000
        self.stats_interval_ms = 0
        self._lost = False
        self._registering = 0
        self._register_at = 0.0
        self._fatal = None
        self._next = 1
        self._stop = False
        self.waiting_reason = ""
        self._io = threading.Thread(target=self._run, name="loom-client-io", daemon=True)
        self._io.start()

    # -- calls --------------------------------------------------------------------------------

    def _enqueue(self, env):
        with self._cond:
            rid = self._next
            self._next += 1
            env.version = PROTOCOL_VERSION
            env.request_id = rid
            is_register = env.WhichOneof("body") == "register"
            if self._fatal is not None and not is_register:
                self._pending[rid] = [env, _error_reply(rid, *self._fatal)]
                return rid
            if not self._lost or is_register:
                self._outbox.append(env.SerializeToString())
            self._pending[rid] = [env, None]
            self._wake()
            return rid

    def _wake(self):
        self._wake_tx.send(b"", zmq.NOBLOCK)

    def _wait(self, rid, timeout_s):
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._pending[rid][1] is None and not self._stop:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    deadline = self._outlasting(time.monotonic(), timeout_s)
                    if deadline is None:
                        break
                    continue
                self._cond.wait(left)
            request, reply = self._pending.pop(rid)
        if reply is None:
            why = self.link_diagnosis()
            raise TimeoutError(f"no reply to {request.WhichOneof('body')} in {timeout_s} s"
                               + (f": {why}" if why else ""))
        return reply

    def link_diagnosis(self) -> str:
        """Why the service may not have answered, from what the link saw; empty once a
        handshake succeeded. A wrong server key is otherwise only silence (CURVE drops it)."""
        with self._cond:
            if self._handshake_ok:
                return ""
            if self._refused:
                return ("the service refused this client's key (not among its "
                        "[security.clients] or admin keys)")
            if not self._ever_connected:
                return f"nothing accepted a connection at {self._endpoint} (is the service up?)"
            if self._curve:
                return ("connected, but the CURVE handshake did not complete: the server key is "
                        "not this service's (a stale server.pub, or the service runs insecure)")
            return ("connected, but the handshake did not complete: the service expects CURVE "
                    "(give it its server.pub)")

    def _outlasting(self, now, timeout_s):
        """A call's deadline passed at `now`: the next one if the service was away meanwhile
        (waiting through the outage up to its limit, and while registering again), else None.
        Under the lock."""
        if self._registration is None or self._fatal is not None:
            return None
        if self._outage_since is not None:
            limit = self._outage_limit_s
            if limit is not None and now - self._outage_since >= limit:
                return None
            return now + 0.1
        if self._lost:
            return now + 0.1
        if self._back_at + timeout_s > now:
            return self._back_at + timeout_s
        return None

    def _on_link_event(self):
        """The link to the service went down or came back (the socket's monitor)."""
        while True:
            try:
                frames = self._monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            event = int.from_bytes(frames[0][:2], "little")
            with self._cond:
                now = time.monotonic()
                self._ever_connected |= event == zmq.EVENT_CONNECTED
                self._handshake_ok |= event == _HANDSHAKE_OK
                self._refused |= event == zmq.EVENT_HANDSHAKE_FAILED_AUTH
                if event == zmq.EVENT_CONNECTED:
                    self._links += 1
                elif event == zmq.EVENT_DISCONNECTED:
                    self._links = max(0, self._links - 1)
                if (event == zmq.EVENT_DISCONNECTED and self._links == 0
                        and self._outage_since is None):
                    self._outage_since = now
                    if self._registration is not None:
                        print(f"loom-client: event=service_unreachable endpoint={self._endpoint} "
                              "waiting for it to come back", file=sys.stderr, flush=True)
                elif event == zmq.EVENT_CONNECTED and self._outage_since is not None:
                    away = now - self._outage_since
                    self._outage_since = None
                    self._back_at = now
                    if self._registration is not None:
                        print(f"loom-client: event=service_reachable endpoint={self._endpoint} "
                              f"after {away:.0f} s", file=sys.stderr, flush=True)
                    self._cond.notify_all()

    def call(self, env, timeout_s=...):
        """Sends a request and returns its reply; raises LoomError (Restarted, JobEnded) on an
        Error reply and TimeoutError when none comes in time."""
        timeout_s = self._timeout_s if timeout_s is ... else timeout_s
        reply = self._wait(self._enqueue(env), timeout_s)
        if reply.WhichOneof("body") == "error":
            raise error_of(reply.error.code, reply.error.message)
        return reply

    def send(self, env):
        """A one-way message; never blocks."""
        env.version = PROTOCOL_VERSION
        with self._cond:
            self._outbox.append(env.SerializeToString())
            self._wake()

    def register(self, role, worker_id, job="", node="", deployment="", gpus=0,
                 data_address=""):
        env = pb.Envelope()
        env.register.role = ROLES[role]
        env.register.worker_id = worker_id
        env.register.job = job
        env.register.node = node
        env.register.deployment = deployment
        env.register.gpus = gpus
        env.register.data_address = data_address
        env.register.incarnation = self._incarnation
        reply = self.call(env).registered
        with self._cond:
            self._registration = env
            self._heartbeat_ms = reply.heartbeat_ms
            self.stats_interval_ms = reply.stats_interval_ms
        return reply

    # -- generation (OrchestrRL §4): engines and routers ----------------------------------------

    def register_engine(self, engine_id, deployment, gpus, node="", data_address=""):
        """An inference engine (role gen-instance): one node's server with `gpus` GPUs. Loom's
        commands (Reconfigure, AdmitRequests, MigrateRequests) arrive at the callbacks or
        next_command; answer each with ack(). Report loads every stats_interval_ms.
        data_address: where other engines pull the requests it released (tokens, KV)."""
        return self.register("gen-instance", engine_id, node=node, deployment=deployment,
                             gpus=gpus, data_address=data_address)

    def register_router(self, router_id, deployment):
        """The framework's request router of a deployment (role gen-router)."""
        return self.register("gen-router", router_id, deployment=deployment)

    def gen_stats(self, stats):
        """One instance's load this tick (a loom_pb2.GenStats); one-way."""
        env = pb.Envelope()
        env.gen_stats.CopyFrom(stats)
        self.send(env)

    def requests_finished(self, deployment, step, done):
        """Requests this engine finished: done = [(request, output_tokens, finished_at_ns)].
        Returns once they are durable (sent again to a restarted service)."""
        env = pb.Envelope()
        env.requests_finished.deployment = deployment
        env.requests_finished.step = step
        for request, output, at_ns in done:
            d = env.requests_finished.requests.add()
            d.request, d.output_tokens, d.finished_at_ns = request, output, at_ns
        self.call(env)

    def ack(self, deployment, command, ok=True, detail="", released=(), elapsed_s=0.0):
        """Answers a command; released: the RequestProgress of what a drain or a migration let
        go."""
        env = pb.Envelope()
        a = env.command_ack
        a.deployment, a.command, a.ok, a.detail, a.elapsed_s = (deployment, command, ok, detail,
                                                                elapsed_s)
        for r in released:
            a.released.add().CopyFrom(r)
        self.send(env)

    def start_step(self, deployment, step, requests, timeout_s=None, data_address=""):
        """The router starts a step: requests = [(request id, prompt tokens)]. Blocks until
        they are placed; returns the StepPlaced (done is set when the step already
        finished). data_address: where engines fetch the prompts and deliver the outputs."""
        env = pb.Envelope()
        env.step_start.deployment = deployment
        env.step_start.step = step
        env.step_start.data_address = data_address
        for request, prompt in requests:
            r = env.step_start.requests.add()
            r.request, r.prompt_tokens = request, prompt
        return self.call(env, timeout_s).step_placed

    def staged(self, job):
        """WEAVE §5.1 Init done: the job's state is in host DRAM (its first acquire says so
        too)."""
        env = pb.Envelope()
        env.staged.job = job
        self.call(env)

    def acquire(self, job, phase, timeout_s=None):
        """WEAVE §5.1: blocks until Loom grants the phase (rollout, training, sync)."""
        env = pb.Envelope()
        env.phase_acquire.job = job
        env.phase_acquire.phase = PHASES[phase]
        grant = self.call(env, timeout_s).phase_grant
        with self._cond:
            self._grants[(job, phase)] = grant
        return grant

    def release(self, job, phase, solo_s, host_memory_gb=0.0):
        """The phase is done; solo_s: how long the same work takes alone on full GPUs;
        host_memory_gb: what its state holds in host DRAM until its next turn, per node, when
        measured (a profiling pass places the job with it)."""
        env = pb.Envelope()
        env.phase_release.job = job
        env.phase_release.phase = PHASES[phase]
        env.phase_release.solo_s = solo_s
        env.phase_release.host_memory_gb = host_memory_gb
        with self._cond:
            grant = self._grants.get((job, phase))
        if grant is not None:
            env.phase_release.iteration = grant.iteration
            env.phase_release.group = grant.group
        self.call(env)

    def progress(self, job, done, total):
        env = pb.Envelope()
        env.progress.job = job
        env.progress.responses_done = done
        env.progress.responses_total = total
        self.send(env)

    def next_command(self, timeout_s=0.0):
        with self._cond:
            if not self._commands and timeout_s:
                self._cond.wait_for(lambda: self._commands, timeout_s)
            return self._commands.popleft() if self._commands else None

    def on_command(self, callback):
        """callback(envelope) for every command, on the I/O thread."""
        with self._cond:
            self._callbacks.append(callback)

    def close(self, reason="done", job_finished=False, job_failed=False):
        """Says goodbye (job_finished: the job is complete, it leaves its group; job_failed:
        it crashed, it fails) and stops; never blocks for long, whatever state the connection
        is in."""
        if self._registration is not None:
            env = pb.Envelope()
            env.goodbye.reason = reason
            env.goodbye.job_finished = job_finished
            env.goodbye.job_failed = job_failed
            self.send(env)
        with self._cond:
            self._registration = None
            self._stop = True
            self._cond.notify_all()
            self._wake()
        self._io.join(timeout=2.0)

    # -- the I/O thread -------------------------------------------------------------------------

    def _lose_session(self):
        if self._registration is None:
            return
        if not self._lost:
            self._lost = True
            self.waiting_reason = ""
            for rid, entry in self._pending.items():
                body = entry[0].WhichOneof("body")
                if entry[1] is None and body not in _SENT_AGAIN + ("register",):
                    entry[1] = _error_reply(rid, pb.ERROR_RESTART_ITERATION,
                                            "the service went away under this request: run "
                                            "the job's iteration again from its rollout")
            self._cond.notify_all()
        if not self._registering:
            self._send_registration()

    def _send_registration(self):
        self._registering = self._next
        self._next += 1
        self._register_at = time.monotonic()
        again = pb.Envelope()
        again.CopyFrom(self._registration)
        again.request_id = self._registering
        self._outbox.append(again.SerializeToString())

    def _registered_again(self, env):
        self._registering = 0
        if env.WhichOneof("body") == "registered":
            self._lost = False
            self._heartbeat_ms = env.registered.heartbeat_ms
            for rid, entry in self._pending.items():
                if entry[1] is None:
                    self._outbox.append(entry[0].SerializeToString())
            return
        code = env.error.code if env.WhichOneof("body") == "error" else pb.ERROR_INTERNAL
        if code in (pb.ERROR_STOPPING, pb.ERROR_UNAVAILABLE, pb.ERROR_CONFLICT):
            self._register_at = time.monotonic() + _REGISTER_RETRY_S
            return
        self._fatal = (code, env.error.message or "registration refused")
        for rid, entry in self._pending.items():
            if entry[1] is None:
                entry[1] = _error_reply(rid, *self._fatal)
        self._cond.notify_all()

    def _take(self, env):
        """Files a reply; returns a command for the callbacks (run unlocked), or None."""
        with self._cond:
            rid = env.request_id
            if rid and rid == self._registering:
                self._registered_again(env)
                return None
            entry = self._pending.get(rid) if rid else None
            body = env.WhichOneof("body")
            sent_again = entry is not None and entry[0].WhichOneof("body") in _SENT_AGAIN
            lost = (self._registration is not None and body == "error"
                    and env.error.code == pb.ERROR_NOT_REGISTERED)
            # Any request answered STOPPING (it may cross the ServiceStopping notice) is sent
            # again to the next service if it can be; otherwise that answer is its reply.
            stopping = body == "service_stopping" or (
                body == "error" and env.error.code == pb.ERROR_STOPPING)
            if lost or stopping:
                self._lose_session()
                if entry is not None and not sent_again and entry[1] is None:
                    entry[1] = env
                self._cond.notify_all()
                return None
            if entry is not None:
                entry[1] = env
                self._cond.notify_all()
                return None
            if rid:
                return None  # nobody waits for it any more
            if body == "waiting":
                self.waiting_reason = env.waiting.reason
            if self._callbacks:
                return env
            self._commands.append(env)
            self._cond.notify_all()
            return None

    def _tick(self, next_beat):
        with self._cond:
            now = time.monotonic()
            if (self._lost and self._registration is not None and self._fatal is None
                    and ((not self._registering and now >= self._register_at)
                         or (self._registering and now - self._register_at > _REGISTER_PATIENCE_S))):
                self._send_registration()
            if self._registration is None or self._lost or now < next_beat:
                return next_beat
            env = pb.Envelope()
            env.version = PROTOCOL_VERSION
            env.heartbeat.SetInParent()
            self._outbox.append(env.SerializeToString())
            return now + max(self._heartbeat_ms / 2000.0, 0.01)

    def _flush(self):
        with self._cond:
            batch, self._outbox = self._outbox, []
        while batch:
            try:
                self._sock.send(batch[0], zmq.NOBLOCK)
            except zmq.Again:
                break
            batch.pop(0)
        if batch:
            with self._cond:
                self._outbox[:0] = batch

    def _receive(self):
        while True:
            try:
                data = self._sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            env = pb.Envelope()
            try:
                env.ParseFromString(data)
            except Exception:
                continue
            command = self._take(env)
            if command is not None:
                for callback in list(self._callbacks):
                    callback(command)

    def _run(self):
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._wake_rx, zmq.POLLIN)
        poller.register(self._monitor, zmq.POLLIN)
        next_beat = time.monotonic()
        while True:
            with self._cond:
                if self._stop:
                    break
                backlog = bool(self._outbox) or self._lost
            events = dict(poller.poll(20 if backlog else 100))
            if self._wake_rx in events:
                while True:
                    try:
                        self._wake_rx.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
            if self._monitor in events:
                self._on_link_event()
            self._receive()
            next_beat = self._tick(next_beat)
            self._flush()
        self._flush()  # a goodbye queued last still goes out
        self._sock.disable_monitor()
        self._monitor.close(linger=0)
        for s in (self._sock, self._wake_rx, self._wake_tx):
            s.close()
