#!/usr/bin/python3
"""A trainer process on Loom: registers with the train role and runs the training phase of
each iteration, then the sync of the new weights to the rollout workers, when granted. Its
rollouts come from a rollout worker (rollout_worker.py) of the same job. After its last
iteration it completes the job. Usage:

  PYTHONPATH=python /usr/bin/python3 python/examples/trainer.py --endpoint tcp://127.0.0.1:5555 \\
      --server-key KEYS/server.pub --key KEYS/trainer --job math-7b --iterations 3
"""

import sys
import threading
import time

from loom_client import Job, JobEnded, Restarted, worker_arguments


_out = threading.Lock()


def say(line):
    """One whole line at a time: callbacks print from the client's I/O thread."""
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main():
    a = worker_arguments(__doc__).parse_args()
    job = Job(a.job, role="train", worker_id=f"{a.job}-trainer", endpoint=a.endpoint,
              server_key=a.server_key, key=a.key, timeout_s=60)
    job.on_job_left(lambda state, reason: say(f"{a.job} left its group: {reason}"))
    it = 0
    try:
        while it < a.iterations:
            try:
                with job.phase("training") as held:
                    say(f"training {a.job} iteration {it} on {held.gpus} GPUs")
                    time.sleep(a.phase_ms / 1000.0)
                with job.phase("sync"):
                    time.sleep(a.phase_ms / 1000.0)
                it += 1
            except Restarted as e:
                say(f"restart {a.job} iteration {it}: {e.message}")
        job.finish()
    except JobEnded as e:
        say(f"ended {a.job}: {e.message}")
        job.close()
    say(f"finished {a.job} status 0")


if __name__ == "__main__":
    main()
