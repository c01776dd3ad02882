#!/usr/bin/python3
"""A collective shim on Loom (Opus §4.1, role collective-shim), as examples/collective_shim.cpp:
registers a PP x FSDP job on its photonic rails (OpusJob), then runs training steps with one
thread per pipeline stage. Before each PP Send/Recv and each FSDP all-gather / reduce-scatter a
stage writes its topo_write and waits for the TopoAck; both ends of a Send/Recv write the same
operation, and a downstream stage starts its first all-gather only once the activation came.
Compute is a sleep. Usage:

  PYTHONPATH=python /usr/bin/python3 python/examples/collective_shim.py \\
      --endpoint tcp://127.0.0.1:5555 --server-key KEYS/server.pub --key KEYS/shim \\
      --job llama --rails rail0 rail1 rail2 rail3 --pp 2 --dp 2
"""

import argparse
import collections
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from loom_client import loom_pb2 as pb  # noqa: E402
from loom_client.client import Client  # noqa: E402

_out = threading.Lock()


def say(line):
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Stage:
    """One pipeline stage's writes, numbered per group."""

    def __init__(self, client, args, stage):
        self.client, self.args, self.stage = client, args, stage
        self.ops = collections.Counter()
        self.writes = 0

    def write(self, group, group_size, digit):
        env = pb.Envelope()
        w = env.topo_write
        w.job, w.group, w.op_index = self.args.job, group, self.ops[group]
        w.group_size, w.stage, w.digit = group_size, self.stage, digit
        self.ops[group] += 1
        ack = self.client.call(env, timeout_s=None).topo_ack
        self.writes += 1
        say(f"stage {self.stage} {group} op {w.op_index} topo {ack.topo}"
            + (" (giant ring)" if ack.fallback else ""))

    def compute(self):
        time.sleep(self.args.compute_ms / 1000.0)

    def step(self):
        s, last = self.stage, self.stage + 1 == self.args.pp
        down, up, dp = f"pp{s}-{s + 1}", f"pp{s - 1}-{s}", f"dp{s}"
        if s > 0:
            self.write(up, 2, 0)      # receive the activation
        self.write(dp, 1, 1)          # FSDP all-gather
        self.compute()                # forward
        if not last:
            self.write(down, 2, 0)    # send the activation
            self.write(down, 2, 0)    # receive the gradient
        self.write(dp, 1, 1)          # all-gather
        self.compute()                # backward
        if s > 0:
            self.write(up, 2, 0)      # send the gradient
        self.write(dp, 1, 1)          # reduce-scatter


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", default="tcp://127.0.0.1:5555")
    p.add_argument("--server-key")
    p.add_argument("--key")
    p.add_argument("--id", default="shim-py")
    p.add_argument("--job", default="opus-job")
    p.add_argument("--rails", nargs="+", required=True)
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("--dp", type=int, default=2)
    p.add_argument("--initial", default="")
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--compute-ms", type=int, default=20)
    a = p.parse_args()
    client = Client(a.endpoint, a.server_key, a.key, timeout_s=30.0)
    client.register("collective-shim", a.id)
    env = pb.Envelope()
    j = env.opus_job
    j.job, j.pp, j.initial = a.job, a.pp, a.initial or "1" * a.pp
    j.symmetrical.append(a.dp)
    j.rails.extend(a.rails)
    client.call(env)
    say(f"job {a.job} on {len(a.rails)} rails, topo {j.initial}")
    stages = [Stage(client, a, s) for s in range(a.pp)]
    for step in range(a.steps):
        failed = []

        def run(stage):
            try:
                stage.step()
            except Exception as e:  # noqa: BLE001 - reported, and the shim exits 1
                failed.append(f"stage {stage.stage}: {e}")

        threads = [threading.Thread(target=run, args=(s,)) for s in stages]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failed:
            sys.stderr.write("; ".join(failed) + "\n")
            return 1
        say(f"step {step} done: {sum(s.writes for s in stages)} topo_writes so far")
    client.close("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
