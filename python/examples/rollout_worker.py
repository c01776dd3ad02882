#!/usr/bin/python3
"""A veRL-style driver on Loom: each iteration asks for its rollout, training and sync phases
in turn and reports back; the work itself is a sleep. Usage:

  PYTHONPATH=build/python python/examples/rollout_worker.py --endpoint tcp://127.0.0.1:5555 \\
      --server-key KEYS/server.pub --key KEYS/worker --job math-7b --iterations 3
"""

import time

from loom_client import Client, Restarted, worker_arguments


def main():
    p = worker_arguments(__doc__)
    p.add_argument("--id")
    p.add_argument("--role", default="rollout")
    p.add_argument("--phase-ms", type=int, default=50)
    a = p.parse_args()
    c = Client(a.endpoint, a.server_key, a.key, timeout_s=60)
    reg = c.register(a.role, a.id or f"{a.job}-py", job=a.job)
    print(f"registered {a.id or a.job + '-py'} resumed={int(reg.resumed)}", flush=True)
    it = 0
    while it < a.iterations:
        try:
            for phase in ("rollout", "training", "sync"):
                grant = c.acquire(a.job, phase)
                print(f"grant {a.job} {phase} iteration {it} gpus {grant.gpus}", flush=True)
                start = time.monotonic()
                time.sleep(a.phase_ms / 1000.0)
                if phase == "rollout":
                    c.progress(a.job, 256, 256)
                c.release(a.job, phase, time.monotonic() - start)
            it += 1
        except Restarted as e:
            print(f"restart {a.job} iteration {it}: {e.message}", flush=True)
    c.close("iterations done", job_finished=True)
    print(f"finished {a.job} status 0", flush=True)


if __name__ == "__main__":
    main()
