"""A GRPO job that learns, on Loom's Job API only: python3 -m loom_torch.grpo.

Each iteration is the loop veRL's `RayPPOTrainer.fit()` and slime's train loop run, one Loom
phase per stage (WEAVE §5.1's run permits):
    with job.phase("rollout"):   groups = rollout.generate(...)        # veRL generate_sequences
    with job.phase("training"):  learner.train(groups)                 # compute_log_prob, update_actor
    with job.phase("sync"):      the new weights to the rollout side   # weight sync to the engines
then a checkpoint, so a job Loom restarts or moves (Restarted, a process killed and started
again) resumes from its last finished iteration and learns what it would have learnt
uninterrupted: every draw is seeded by (seed, iteration, prompt) alone.

Roles: `driver` runs every stage in one process (its sync is an in-process copy); `train` and
`rollout` split them over processes as veRL's and slime's separate actors and engines do. The
trainer serves each new version of the weights on its data channel and its sync phase ends when
every rollout worker holds it, pulled along the route Loom's sync grant gives (WEAVE §5.2: once
over the cross-cluster link, then rollout worker to rollout worker); rollout workers send their
groups to the trainer's channel. Rollout worker `--rank 0` ends the rollout phase once the
trainer has every group.

Configured like any worker, from LOOM_ENDPOINT, LOOM_SERVER_KEY, LOOM_KEY and LOOM_JOB; a driver
without LOOM_ENDPOINT runs unscheduled. Prints one JSON line per iteration.
"""

import argparse
import copy
import json
import os
import random
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import torch

from loom_client import Job, JobEnded, Restarted
from loom_client.data_channel import DataServer, ask
from loom_client.weights import WeightChannel, fetch, report_synced

from .config import ModelConfig
from .model import Weights, init_weights, pack_weights, unpack_weights
from .rollout import Group, RolloutPolicy, iteration_batch
from .tasks import TASKS, Problem
from .trainer import Trainer

CHECKPOINT = "grpo.pt"


def seed_for(seed: int, iteration: int, index: int = 0) -> int:
    """The seed of one draw: the iteration's batch (index 0) or one prompt's group."""
    return ((seed * 1_000_003 + iteration) * 1_009 + index) % (1 << 62)


@dataclass
class Progress:
    """What a checkpoint restores: iterations done, the policy's weights and AdamW's state."""

    iteration: int
    weights: Weights
    optimizer: Dict[str, Any]

    def save(self, folder: str) -> None:
        """Atomically (write, then rename): a kill mid-save leaves the previous one."""
        path = os.path.join(folder, CHECKPOINT)
        torch.save(self.__dict__, path + ".tmp")
        os.replace(path + ".tmp", path)

    @staticmethod
    def load(folder: str) -> Optional["Progress"]:
        path = os.path.join(folder, CHECKPOINT)
        return Progress(**torch.load(path)) if os.path.exists(path) else None


def model_config(a: argparse.Namespace) -> ModelConfig:
    return ModelConfig(layers=a.layers, hidden=a.hidden, heads=4, kv_heads=2, ffn=2 * a.hidden)


class Learner:
    """The trainable policy of the driver and train roles, with its last finished iteration."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.trainer = Trainer(model_config(a), init_weights(model_config(a), a.seed), a.lr,
                               minibatches=a.minibatches)
        self.iteration = 0
        self.last = self.snapshot()

    def snapshot(self) -> Progress:
        return Progress(self.iteration, copy.deepcopy(self.trainer.state()),
                        copy.deepcopy(self.trainer.optimizer.state_dict()))

    def restore(self, p: Progress) -> None:
        with torch.no_grad():
            for k, v in p.weights.items():
                self.trainer.weights[k].copy_(v)
        self.trainer.optimizer.load_state_dict(p.optimizer)
        self.iteration = p.iteration

    def resume(self) -> None:
        """From the checkpoint folder, if it holds one."""
        if not self.a.checkpoint:
            return
        os.makedirs(self.a.checkpoint, exist_ok=True)
        saved = Progress.load(self.a.checkpoint)
        if saved is not None:
            self.restore(saved)
            self.last = saved
            say({"event": "resumed", "iteration": self.iteration})

    def rewind(self, e: Restarted) -> None:
        """Loom did not count the iteration: back to the last finished one."""
        self.restore(self.last)
        say({"event": "restarted", "iteration": self.iteration, "reason": e.message})

    def train(self, groups: List[Group]) -> Dict[str, float]:
        return self.trainer.update(groups, random.Random(seed_for(self.a.seed, self.iteration + 1)))

    def finished(self) -> None:
        """The iteration is synced: count it and keep it."""
        self.iteration += 1
        self.last = self.snapshot()
        if self.a.checkpoint:
            self.last.save(self.a.checkpoint)


def rollout_share(a: argparse.Namespace, policy: RolloutPolicy, iteration: int, rank: int,
                  workers: int) -> List[Group]:
    """This worker's part of the iteration's groups: prompts rank, rank + workers, ..."""
    batch = iteration_batch(a.task, a.digits, a.prompts, seed_for(a.seed, iteration))
    mine = [(i, p) for i, p in enumerate(batch) if i % workers == rank]
    return policy.generate(mine, a.group, lambda i: seed_for(a.seed, iteration, i + 1))


def record(iteration: int, groups: List[Group], stats: Dict[str, float], version: int,
           moved: int, times: List[float], gpus: int) -> Dict[str, Any]:
    rewards = [r for g in groups for r in g.rewards]
    return {"iteration": iteration, "reward": round(sum(rewards) / len(rewards), 4),
            "solved": round(sum(g.solved for g in groups) / len(groups), 4),
            "loss": round(stats["loss"], 5), "clipped": round(stats["clipped"], 4),
            "weights_version": version, "sync_bytes": moved, "rollout_gpus": gpus,
            "rollout_s": round(times[1] - times[0], 3), "training_s": round(times[2] - times[1], 3),
            "sync_s": round(times[3] - times[2], 3)}


def say(line: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()


def nbytes(weights: Weights) -> int:
    return sum(v.numel() * v.element_size() for v in weights.values())


def run_driver(a: argparse.Namespace, job: Job) -> None:
    """Every stage in this process; the sync copies the weights to the rollout policy."""
    learner = Learner(a)
    learner.resume()
    policy = RolloutPolicy(model_config(a), learner.trainer.state(), learner.iteration)
    while learner.iteration < a.iterations:
        k, times = learner.iteration + 1, [time.monotonic()]
        try:
            with job.phase("rollout") as rollout:
                groups = rollout_share(a, policy, k, 0, 1)
                job.progress(len(groups), a.prompts)
            times.append(time.monotonic())
            with job.phase("training"):
                stats = learner.train(groups)
            times.append(time.monotonic())
            with job.phase("sync"):
                policy.load(learner.trainer.state(), k)
            times.append(time.monotonic())
        except Restarted as e:
            learner.rewind(e)
            policy.load(learner.trainer.state(), learner.iteration)
            continue
        learner.finished()
        say(record(k, groups, stats, policy.version, nbytes(learner.trainer.state()), times,
                   rollout.gpus))


class Inbox:
    """The groups rollout workers sent the trainer, by iteration (the trainer's channel)."""

    def __init__(self, server: DataServer, prompts: int, wanted: Callable[[], Dict[str, Any]]):
        self._groups: Dict[int, Dict[int, Group]] = {}
        self._changed = threading.Condition()
        self.prompts, self._wanted = prompts, wanted
        self.attempt = 0  # counts iterations dropped to run again from their rollout
        server.on(b"samples", self._take)
        server.on(b"want", lambda args: [json.dumps(dict(self._wanted(),
                                                         attempt=self.attempt)).encode()])
        server.on(b"complete", lambda args: [b"yes" if self.complete(int(args[0])) else b"no"])

    def _take(self, args: List[bytes]) -> List[bytes]:
        iteration = int(args[0])
        with self._changed:
            got = self._groups.setdefault(iteration, {})
            for g in json.loads(args[1]):
                got[g["index"]] = Group(g["index"], Problem(g["prompt"], g["answer"]),
                                        g["responses"], g["rewards"])
            self._changed.notify_all()
        return [b"ok"]

    def complete(self, iteration: int) -> bool:
        with self._changed:
            return len(self._groups.get(iteration, {})) >= self.prompts

    def wait(self, iteration: int) -> List[Group]:
        with self._changed:
            self._changed.wait_for(lambda: len(self._groups.get(iteration, {})) >= self.prompts)
            return list(self._groups[iteration].values())

    def drop(self, iteration: int) -> None:
        with self._changed:
            self._groups.pop(iteration, None)
            self.attempt += 1


def run_trainer(a: argparse.Namespace, job: Job, server: DataServer) -> None:
    """Training and sync; the rollout workers' groups come to this worker's channel."""
    learner = Learner(a)
    learner.resume()
    weights = WeightChannel(server)
    inbox = Inbox(server, a.prompts, lambda: {"iteration": learner.iteration + 1,
                                              "done": learner.iteration >= a.iterations})
    weights.publish(learner.iteration, *pack_weights(learner.trainer.state()))
    while learner.iteration < a.iterations:
        k = learner.iteration + 1
        groups = inbox.wait(k)
        times = [time.monotonic()] * 2
        try:
            with job.phase("training"):
                stats = learner.train(groups)
            times.append(time.monotonic())
            with job.phase("sync") as sync:
                weights.publish(k, *pack_weights(learner.trainer.state()))
                receivers = [h.worker for h in sync.grant.sync_route]
                missing = weights.wait_synced(k, receivers, a.sync_timeout_s)
            times.append(time.monotonic())
        except Restarted as e:
            learner.rewind(e)
            inbox.drop(k)
            continue
        learner.finished()
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
    """One request to the trainer's channel: its first frame, None when it does not answer."""
    answer = ask(trainer, list(frames), timeout_s)
    return None if answer is None else bytes(answer[0])


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
                groups = rollout_share(a, policy, k, a.rank, a.workers)
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
        say({"event": "rollout", "iteration": k, "groups": len(groups),
             "weights_version": policy.version,
             "source": rollout.grant.source_of(job.worker_id), "address": server.address})
        puller.target = k  # the sync after this iteration's training delivers version k
        puller.wake.set()
        wait_turn(trainer, want)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m loom_torch.grpo", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=sorted(TASKS), default="reverse")
    p.add_argument("--digits", type=int, default=1, help="digits per operand")
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prompts", type=int, default=16, help="prompts per iteration")
    p.add_argument("--group", type=int, default=16, help="samples per prompt (GRPO's G)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--minibatches", type=int, default=2, help="optimizer steps per iteration")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--checkpoint", help="folder of the checkpoint written after every sync")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    p.add_argument("--role", choices=("driver", "train", "rollout"), default="driver")
    p.add_argument("--rank", type=int, default=0, help="rollout: this worker's rank")
    p.add_argument("--workers", type=int, default=1, help="rollout: how many rollout workers")
    p.add_argument("--node", default="", help="the node this worker runs on (the sync route's)")
    p.add_argument("--worker-id", help="default: JOB-ROLE[-RANK]")
    p.add_argument("--sync-timeout-s", type=float, default=120.0)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.role == "driver":
        job = Job(role="driver", node=a.node, worker_id=a.worker_id)
        return serve(job, lambda: run_driver(a, job))
    if not os.environ.get("LOOM_ENDPOINT"):
        p.error(f"--role {a.role} needs Loom (LOOM_ENDPOINT): the sync route comes from it")
    server = DataServer()
    name = os.environ.get("LOOM_JOB", "")
    worker = a.worker_id or (f"{name}-rollout-{a.rank}" if a.role == "rollout" else f"{name}-train")
    job = Job(role=a.role, node=a.node, worker_id=worker, data_address=server.address)
    run = run_trainer if a.role == "train" else run_rollout
    return serve(job, lambda: run(a, job, server), finish=a.role == "train")


def serve(job: Job, run, finish: bool = True) -> int:
    """Runs the role; the job is finished by the worker that ran its last stage."""
    try:
        run()
    except JobEnded as e:
        say({"event": "job_ended", "reason": e.message})
        job.close(e.message)
        return 0 if not finish else 1
    if finish:
        job.finish()
    else:
        job.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
