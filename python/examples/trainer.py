#!/usr/bin/python3
"""A trainer process on Loom: registers with the train role and runs the training phase of
each iteration when granted, watching for commands (the job leaving its group). Usage:

  PYTHONPATH=build/python python/examples/trainer.py --endpoint tcp://127.0.0.1:5555 \\
      --server-key KEYS/server.pub --key KEYS/trainer --job math-7b --iterations 3
"""

import time

from loom_client import Client, worker_arguments


def main():
    p = worker_arguments(__doc__)
    p.add_argument("--step-ms", type=int, default=50)
    a = p.parse_args()
    c = Client(a.endpoint, a.server_key, a.key, timeout_s=60)
    c.register("train", f"{a.job}-trainer", job=a.job)
    for it in range(a.iterations):
        grant = c.acquire(a.job, "training")
        print(f"training {a.job} iteration {it} on {grant.gpus} GPUs", flush=True)
        start = time.monotonic()
        time.sleep(a.step_ms / 1000.0)
        c.release(a.job, "training", time.monotonic() - start)
        cmd = c.next_command(0)
        if cmd is not None and cmd.WhichOneof("body") == "job_left":
            print(f"{a.job} left its group: {cmd.job_left.reason}", flush=True)
            break
    c.close()


if __name__ == "__main__":
    main()
