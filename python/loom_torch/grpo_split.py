"""The GRPO job over processes: `--role train` and `--role rollout`, as veRL's actor and
rollout workers and slime's Megatron and SGLang processes split it.

The trainer serves each new version of the weights on its data channel, and its sync phase ends
when every rollout worker holds it, pulled along the route Loom's sync grant gives (WEAVE §5.2:
once over the cross-cluster link, then rollout worker to rollout worker). Rollout workers send
their groups to the trainer's channel; every one acquires the rollout phase, and rank 0 ends it
once the trainer has every group (a permit is the job's, not a worker's).
"""

import argparse
import json
import threading
import time
from typing import Any, Callable, Dict, List, Optional

from loom_client import Job, JobEnded, Restarted
from loom_client import loom_pb2 as pb
from loom_client.data_channel import GONE, DataServer, ask
from loom_client.weights import WeightChannel, fetch, report_synced

from .learner import (Learner, model_config, nbytes, record, response_tokens, rollout_share,
                      say)
from .model import Weights, init_weights, pack_weights, unpack_weights
from .rollout import Group, RolloutPolicy
from .tasks import Problem

# JobLeft states after which the job runs on in another group (its workers wait for it there).
PLACED_AGAIN = ("JOB_STATE_DRIFTED", "JOB_STATE_MOVED", "JOB_STATE_PROFILED")


class Inbox:
    """The groups rollout workers sent the trainer, by iteration (the trainer's channel)."""

    def __init__(self, server: DataServer, prompts: int, wanted: Callable[[], Dict[str, Any]]):
        self._groups: Dict[int, Dict[int, Group]] = {}
        self._trained = 0  # iterations up to this one are trained: their groups are gone
        self._changed = threading.Condition()
        self.prompts, self._wanted = prompts, wanted
        self.attempt = 0  # counts iterations dropped to run again from their rollout
        self.ended: Optional[str] = None  # why the job ended, once Loom said so
        server.on(b"samples", self._take)
        server.on(b"want", lambda args: [json.dumps(dict(self._wanted(),
                                                         attempt=self.attempt)).encode()])
        server.on(b"complete", lambda args: [b"yes" if self.complete(int(args[0])) else b"no"])

    def _take(self, args: List[bytes]) -> List[bytes]:
        iteration = int(args[0])
        with self._changed:
            if iteration <= self._trained:
                return [b"ok"]  # late: that iteration is trained already
            got = self._groups.setdefault(iteration, {})
            for g in json.loads(args[1]):
                got[g["index"]] = Group(g["index"], Problem(g["prompt"], g["answer"]),
                                        g["responses"], g["rewards"])
            self._changed.notify_all()
        return [b"ok"]

    def complete(self, iteration: int) -> bool:
        with self._changed:
            return (iteration <= self._trained
                    or len(self._groups.get(iteration, {})) >= self.prompts)

    def wait(self, iteration: int) -> List[Group]:
        """The iteration's groups once every one came; JobEnded if the job ends first (its
        rollout workers then send no more)."""
        with self._changed:
            self._changed.wait_for(lambda: self.ended is not None
                                   or len(self._groups.get(iteration, {})) >= self.prompts)
            if self.ended is not None:
                raise JobEnded(pb.ERROR_JOB_ENDED, self.ended)
            return list(self._groups[iteration].values())

    def end(self, state: str, reason: str) -> None:
        """Loom said the job left its group; unless it is only being placed again, it ended."""
        if state in PLACED_AGAIN:
            return
        with self._changed:
            self.ended = f"{state}: {reason}"
            self._changed.notify_all()

    def trained(self, iteration: int) -> None:
        """The iteration is trained: its groups (and any before) go, so that a long run does
        not keep every iteration's samples."""
        with self._changed:
            self._trained = max(self._trained, iteration)
            for k in [k for k in self._groups if k <= iteration]:
                del self._groups[k]

    def drop(self, iteration: int) -> None:
        with self._changed:
            self._groups.pop(iteration, None)
            self.attempt += 1


class TrainWorker:
    """Training and sync; the rollout workers' groups come to this worker's channel. Built
    before the worker registers with Loom: the sync route names the channel's address from
    then on, and a rollout worker asking it before its handlers were set got GONE."""

    def __init__(self, a: argparse.Namespace, server: DataServer):
        self.a = a
        self.learner = Learner(a)
        self.learner.resume()
        self.weights = WeightChannel(server)
        learner = self.learner
        self.inbox = Inbox(server, a.prompts, lambda: {"iteration": learner.iteration + 1,
                                                       "done": learner.iteration >= a.iterations})
        self.weights.publish(learner.iteration, *pack_weights(learner.trainer.state()))

    def run(self, job: Job) -> None:
        a, learner, weights, inbox = self.a, self.learner, self.weights, self.inbox
        job.on_job_left(inbox.end)
        while learner.iteration < a.iterations:
            k = learner.iteration + 1
            groups = inbox.wait(k)
            times = [time.monotonic()] * 2
            try:
                with job.phase("training") as training:
                    stats = learner.train(groups, training.profiling)
                    training.host_memory_gb = stats["host_memory_gb"]
                times.append(time.monotonic())
                with job.phase("sync") as sync:
                    # a profiling pass kept nothing: the version the workers hold goes again
                    version = k - 1 if sync.profiling else k
                    weights.publish(version, *pack_weights(learner.trainer.state()))
                    receivers = [h.worker for h in sync.grant.sync_route]
                    missing = weights.wait_synced(version, receivers, a.sync_timeout_s)
                times.append(time.monotonic())
            except Restarted as e:
                learner.rewind(e)
                inbox.drop(k)
                continue
            if sync.profiling:  # WEAVE §5 (1): the workers run iteration k again, for real
                inbox.drop(k)
                say({"event": "profiled", "training_s": round(times[2] - times[1], 3),
                     "rollout_tokens": response_tokens(groups),
                     "sync_s": round(times[3] - times[2], 3)})
                continue
            learner.finished()
            inbox.trained(k)
            line = record(k, groups, stats, k, nbytes(learner.trainer.state()), times, 0)
            line["sync_route"] = [[h.worker, h.source] for h in sync.grant.sync_route]
            line["sync_missing"] = sorted(missing)
            say(line)


class Puller(threading.Thread):
    """A rollout worker's side of the sync: pulls the version it is told to hold from its
    source on the route, serves it on, and tells the trainer it has it."""

    def __init__(self, me: str, weights: WeightChannel):
        super().__init__(daemon=True, name="weights")
        self.me, self.weights = me, weights
        self.pulled: Dict[int, int] = {}  # bytes received per version, counted as they came
        self.grant = None
        self.target = 0
        self.wake = threading.Event()

    def run(self) -> None:
        while True:
            self.wake.wait(0.05)
            self.wake.clear()
            grant, target = self.grant, self.target
            source = grant.source_of(self.me) if grant else None
            if source is None or self.weights.get(target) is not None:
                continue
            try:
                got = fetch(source, target, timeout_s=1.0)
            except TimeoutError:
                continue
            self.pulled[target] = sum(len(b) for b in got[1].values())
            self.weights.publish(target, *got)
            report_synced(grant.trainer(), target, self.me)

    def hold(self, version: int, timeout_s: float) -> Weights:
        """The weights of `version`, once pulled."""
        self.target = version
        self.wake.set()
        until = time.monotonic() + timeout_s
        while self.weights.get(version) is None:
            if time.monotonic() > until:
                raise TimeoutError(f"weights version {version} never came")
            time.sleep(0.01)
        return unpack_weights(*self.weights.get(version))


def call(trainer: str, *frames: bytes, timeout_s: float = 30.0) -> Optional[bytes]:
    """One request to the trainer's channel: its first frame, None when it does not answer
    within `timeout_s`. GONE (a trainer still starting, or started again, has not set up what
    answers) is asked again, as the data channel's contract says of an early receiver."""
    until = time.monotonic() + timeout_s
    while True:
        answer = ask(trainer, list(frames), max(0.1, until - time.monotonic()))
        if answer is None:
            return None
        if bytes(answer[0]) != GONE:
            return bytes(answer[0])
        if time.monotonic() >= until:
            return None
        time.sleep(0.05)


def wanted(trainer: str) -> Dict[str, Any]:
    answer = call(trainer, b"want")
    if answer is None:
        raise RuntimeError(f"the trainer's channel at {trainer} does not answer")
    return json.loads(answer)


def wait_turn(trainer: str, want: Dict[str, Any]) -> None:
    """After sending the groups of the iteration `want` named: waits until the trainer has
    moved on (it wants the next, or finished and left), or dropped them (a Restarted
    iteration runs again from its rollout). Loom's next permit or JobEnded says which."""
    while True:
        now = call(trainer, b"want", timeout_s=2.0)
        if now is None or json.loads(now) != want:
            return
        time.sleep(0.02)


def run_rollout(a: argparse.Namespace, job: Job, server: DataServer) -> None:
    """Generates this worker's share of each iteration the trainer wants, with the weights
    the sync before it delivered; rank 0 ends the phase once the trainer has every group."""
    puller = Puller(job.worker_id, WeightChannel(server))
    puller.start()
    policy = RolloutPolicy(model_config(a), init_weights(model_config(a), a.seed), -1)
    lead = a.rank == 0
    while True:
        try:
            with job.phase("rollout", release=lead) as rollout:
                while rollout.grant.source_of(job.worker_id) is None:
                    time.sleep(0.1)  # the trainer has not registered its channel yet
                    rollout.refresh()
                puller.grant = rollout.grant
                trainer = rollout.grant.trainer()
                want = wanted(trainer)
                if want["done"]:
                    return
                k = want["iteration"]
                if policy.version != k - 1:
                    policy.load(puller.hold(k - 1, a.sync_timeout_s), k - 1)
                groups = rollout_share(a, policy, k, a.rank, a.workers, rollout.profiling)
                rollout.host_memory_gb = policy.host_memory_gb()
                call(trainer, b"samples", str(k).encode(), json.dumps([
                    {"index": g.index, "prompt": g.problem.prompt, "answer": g.problem.answer,
                     "responses": g.responses, "rewards": g.rewards} for g in groups]).encode())
                while lead and call(trainer, b"complete", str(k).encode()) != b"yes":
                    time.sleep(0.01)
                if lead:
                    job.progress(a.prompts, a.prompts)
        except Restarted as e:
            say({"event": "restarted", "reason": e.message})
            continue
        if not rollout.profiling:  # a profiling pass is no iteration: k runs again
            say({"event": "rollout", "iteration": k, "groups": len(groups),
                 "weights_version": policy.version,
                 "pulled_bytes": puller.pulled.get(policy.version, 0),
                 "source": rollout.grant.source_of(job.worker_id), "address": server.address})
            puller.target = k  # the sync after this iteration's training delivers version k
            puller.wake.set()
        wait_turn(trainer, want)
