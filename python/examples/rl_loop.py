#!/usr/bin/python3
"""An RL training loop shaped like veRL's and slime's drivers, on Loom's Job API only: each
step generates rollouts, trains on them and syncs the new weights to the rollout engines, each
stage inside its Loom phase. generate/train/sync are pure-Python stand-ins (no torch).

Configured from the environment, as a framework image would be: LOOM_ENDPOINT,
LOOM_SERVER_KEY, LOOM_KEY, LOOM_JOB. Without LOOM_ENDPOINT it runs on its own, unscheduled:

  /usr/bin/python3 python/examples/rl_loop.py --steps 3
"""

import argparse
import random
import sys
import threading
import time

from loom_client import Job, JobEnded, Restarted


def generate(prompts, rng, step_s):
    """Stand-in rollout: one response length per prompt, heavy-tailed."""
    time.sleep(step_s)
    return [min(8192, int(rng.lognormvariate(7, 0.8))) for _ in prompts]


def train(responses, step_s):
    """Stand-in PPO/GRPO update: the mean response length as the 'loss'."""
    time.sleep(step_s)
    return sum(responses) / max(1, len(responses))


def sync_weights(version, step_s):
    """Stand-in weight sync to the rollout engines."""
    time.sleep(step_s)
    return version + 1


_out = threading.Lock()


def say(line):
    """One whole line at a time: callbacks print from the client's I/O thread."""
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--phase-ms", type=int, default=50)
    a = p.parse_args()
    rng = random.Random(7)
    step_s = a.phase_ms / 1000.0
    job = Job(role="driver")
    job.on_job_left(lambda state, reason: say(f"left: {state} {reason}"))
    say(f"loom {'on' if job.enabled else 'off'} job {job.name or '-'}")

    @job.phase("training")
    def train_step(responses):
        return train(responses, step_s)

    version, step = 0, 0
    try:
        while step < a.steps:
            try:
                with job.phase("rollout") as rollout:
                    responses = generate(range(a.batch), rng, step_s)
                    job.progress(len(responses), a.batch)
                loss = train_step(responses)
                with job.phase("sync"):
                    version = sync_weights(version, step_s)
                say(f"step {step} gpus {rollout.gpus} loss {loss:.1f} weights v{version}")
                step += 1
            except Restarted as e:
                say(f"step {step} again: {e.message}")
        job.finish()
    except JobEnded as e:
        say(f"ended: {e.message}")
        job.close()
    say(f"done {step} steps")


if __name__ == "__main__":
    main()
