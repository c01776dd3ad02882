#!/usr/bin/python3
"""A rollout worker on Loom: each iteration it asks for the rollout phase, generates (a sleep),
reports its progress, and releases it. With --role driver it runs every phase of the job
(rollout, training, sync), as a framework's single controller does. Usage:

  PYTHONPATH=python /usr/bin/python3 python/examples/rollout_worker.py \\
      --endpoint tcp://127.0.0.1:5555 --server-key KEYS/server.pub --key KEYS/worker \\
      --job math-7b --iterations 3 [--role driver]
"""

import sys
import threading
import time

from loom_client import Job, JobEnded, Restarted, worker_arguments

PHASES = {"rollout": ("rollout",), "driver": ("rollout", "training", "sync")}


_out = threading.Lock()


def say(line):
    """One whole line at a time: callbacks print from the client's I/O thread."""
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def main():
    p = worker_arguments(__doc__)
    p.add_argument("--id")
    p.add_argument("--role", default="rollout", choices=sorted(PHASES))
    a = p.parse_args()
    job = Job(a.job, role=a.role, worker_id=a.id or f"{a.job}-{a.role}-py",
              endpoint=a.endpoint, server_key=a.server_key, key=a.key, timeout_s=60)
    say(f"registered {a.id or a.job} resumed={int(job.registration.resumed)}")
    job.on_tail_migration(lambda gpus: say(f"tail {a.job} now on {gpus} GPUs"))
    it = 0
    try:
        while it < a.iterations:
            try:
                for phase in PHASES[a.role]:
                    with job.phase(phase) as held:
                        on = " ".join(f"{n}:{','.join(map(str, d))}"
                                      for n, d in held.devices.items())
                        say(f"grant {a.job} {phase} iteration {it} gpus {held.gpus} "
                            f"loom_iteration {held.iteration} devices {on or '-'}")
                        time.sleep(a.phase_ms / 1000.0)
                        if phase == "rollout":
                            job.progress(256, 256)
                it += 1
            except Restarted as e:
                say(f"restart {a.job} iteration {it}: {e.message}")
    except JobEnded as e:
        say(f"ended {a.job}: {e.message}")
    # A driver completes its job; a rollout worker leaves that to the trainer.
    job.close("iterations done", finished=a.role == "driver")
    say(f"finished {a.job} status 0")


if __name__ == "__main__":
    main()
