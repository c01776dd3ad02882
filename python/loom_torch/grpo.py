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
`rollout` split them over processes (grpo_split.py), the weights moving along Loom's route.

Configured like any worker, from LOOM_ENDPOINT, LOOM_SERVER_KEY, LOOM_KEY and LOOM_JOB; a driver
without LOOM_ENDPOINT runs unscheduled. Prints one JSON line per iteration.
"""

import argparse
import os
import sys
import time
from typing import List, Optional

import torch

from loom_client import Job, JobEnded, Restarted
from loom_client.data_channel import DataServer

from .grpo_split import TrainWorker, run_rollout
from .learner import Learner, model_config, nbytes, profiled, record, rollout_share, say
from .rollout import RolloutPolicy
from .tasks import TASKS


def run_driver(a: argparse.Namespace, job: Job) -> None:
    """Every stage in this process; the sync copies the weights to the rollout policy. A
    profiling pass (profile = true, WEAVE §5 (1)) runs the same stages at the maximum
    response length and keeps nothing; each phase reports its host-memory footprint."""
    learner = Learner(a)
    learner.resume()
    policy = RolloutPolicy(model_config(a), learner.trainer.state(), learner.iteration)
    while learner.iteration < a.iterations:
        k, times = learner.iteration + 1, [time.monotonic()]
        try:
            with job.phase("rollout") as rollout:
                groups = rollout_share(a, policy, k, 0, 1, to_max=rollout.profiling)
                job.progress(len(groups), a.prompts)
                rollout.host_memory_gb = policy.host_memory_gb()
            times.append(time.monotonic())
            with job.phase("training") as training:
                stats = learner.train(groups, training.profiling)
                training.host_memory_gb = stats["host_memory_gb"]
            times.append(time.monotonic())
            with job.phase("sync") as sync:
                policy.load(learner.trainer.state(), learner.iteration + (not sync.profiling))
            times.append(time.monotonic())
        except Restarted as e:
            learner.rewind(e)
            policy.load(learner.trainer.state(), learner.iteration)
            continue
        if sync.profiling:
            say(profiled(times, groups, rollout, training))
            continue
        learner.finished()
        say(record(k, groups, stats, policy.version, nbytes(learner.trainer.state()), times,
                   rollout.gpus))


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
    p.add_argument("--base-steps", type=int, default=60,
                   help="next-token steps that teach the base model the answers' form before "
                        "RL (0: RL from random weights)")
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
    trainer = TrainWorker(a, server) if a.role == "train" else None  # answers before it registers
    job = Job(role=a.role, node=a.node, worker_id=worker, data_address=server.address)
    if trainer is not None:
        return serve(job, lambda: trainer.run(job))
    return serve(job, lambda: run_rollout(a, job, server), finish=False)


def serve(job: Job, run, finish: bool = True) -> int:
    """Runs the role; the job is finished by the worker that ran its last stage."""
    try:
        run()
    except JobEnded as e:
        say({"event": "job_ended", "reason": e.message})
        job.close(e.message)
        return 0 if not finish else 1
    except Exception as e:
        # The job crashed here: Loom fails it now, with the reason, instead of after this
        # worker's silence (WEAVE §5.3's detector, 20 s later and with none).
        job.close(f"{type(e).__name__}: {e}", failed=True)
        raise
    if finish:
        job.finish()
    else:
        job.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
