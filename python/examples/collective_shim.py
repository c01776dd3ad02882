#!/usr/bin/python3
"""A collective shim on Loom (Opus §4.1-4.2, role collective-shim), as examples/collective_shim.cpp:
registers a PP x FSDP job on its photonic rails (OpusJob), then runs training steps with one
thread per pipeline stage, each stage's collectives going through loom_client.opus.StageShim:
PP Send/Recv (both ends write the same operation) and FSDP all-gathers and reduce-scatters; a
downstream stage starts its first all-gather only once the activation came. The first
--profile-steps steps write before every collective; then the traces go to Loom, which answers
the phase table, and the shims write only where phases change (provisioning the next phase
early in provisioning mode). The job gets its own ports on the rails (Opus §7; --first-port asks
for a range) and, with --end, ends after its steps, freeing them. Compute is a sleep. Usage:

  PYTHONPATH=python /usr/bin/python3 python/examples/collective_shim.py \\
      --endpoint tcp://127.0.0.1:5555 --server-key KEYS/server.pub --key KEYS/shim \\
      --job llama --rails rail0 rail1 rail2 rail3 --pp 2 --dp 2 --steps 3
"""

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from loom_client import loom_pb2 as pb  # noqa: E402
from loom_client.client import Client  # noqa: E402
from loom_client.opus import Op, StageShim, phase_table  # noqa: E402

_out = threading.Lock()


def say(line):
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Stage:
    """One pipeline stage's training step over its shim."""

    def __init__(self, client, args, stage, topo):
        self.args, self.stage = args, stage
        self.shim = StageShim(client, args.job, stage, args.mode, topo)

    def comm(self, op):
        self.shim.pre_comm(op)
        say(f"stage {self.stage} {op.group} topo {self.shim.topo}")
        self.shim.post_comm()  # the collective itself takes no time here

    def compute(self):
        time.sleep(self.args.compute_ms / 1000.0)

    def step(self):
        s, last = self.stage, self.stage + 1 == self.args.pp
        down, up, dp = Op(f"pp{s}-{s + 1}", 2, 0), Op(f"pp{s - 1}-{s}", 2, 0), Op(f"dp{s}", 1, 1)
        if s > 0:
            self.comm(up)         # receive the activation
        self.comm(dp)             # FSDP all-gather
        self.compute()            # forward
        if not last:
            self.comm(down)       # send the activation
            self.comm(down)       # receive the gradient
        self.comm(dp)             # all-gather
        self.compute()            # backward
        if s > 0:
            self.comm(up)         # send the gradient
        self.comm(dp)             # reduce-scatter


def register(client, a, traces=()):
    env = pb.Envelope()
    j = env.opus_job
    j.job, j.pp, j.initial = a.job, a.pp, a.initial or "1" * a.pp
    j.first_port = a.first_port
    j.symmetrical.append(a.dp)
    j.rails.extend(a.rails)
    j.traces.extend(traces)
    return client.call(env).opus_registered


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
    p.add_argument("--profile-steps", type=int, default=1)
    p.add_argument("--mode", choices=("on-demand", "provisioning"), default="provisioning")
    p.add_argument("--compute-ms", type=int, default=20)
    p.add_argument("--first-port", type=int, default=0,
                   help="rank 0's port on every rail (0: Loom picks the lowest free range)")
    p.add_argument("--end", action="store_true",
                   help="end the job after its steps: its rails' ports are freed (Opus §7)")
    a = p.parse_args()
    client = Client(a.endpoint, a.server_key, a.key, timeout_s=30.0)
    client.register("collective-shim", a.id, job=a.job)
    job = register(client, a)
    last = job.first_port + a.pp * a.dp - 1
    say(f"job {a.job} on {len(a.rails)} rails, topo {job.topo}, ports {job.first_port}-{last}")
    stages = [Stage(client, a, s, job.topo) for s in range(a.pp)]
    for step in range(a.steps):
        failed = []

        def run(stage, last):
            try:
                if last:
                    stage.shim.last = True
                stage.step()
                stage.shim.end_step()
            except Exception as e:  # noqa: BLE001 - reported, and the shim exits 1
                failed.append(f"stage {stage.stage}: {e}")

        threads = [threading.Thread(target=run, args=(s, step + 1 == a.steps)) for s in stages]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failed:
            sys.stderr.write("; ".join(failed) + "\n")
            return 1
        say(f"step {step} done: {sum(s.shim.writes for s in stages)} topo_writes so far")
        if step + 1 == a.profile_steps:
            learned = register(client, a, [s.shim.trace() for s in stages])
            for s in stages:
                if not s.shim.set_table(phase_table(learned, s.stage)):
                    sys.stderr.write(f"stage {s.stage}: the phase table does not match\n")
            say(f"phase table learned: {len(learned.phases)} phases over {a.pp} stages")
    for s in stages:
        s.shim.close()
    if a.end:
        env = pb.Envelope()
        env.opus_job_end.job = a.job
        client.call(env)
        say(f"job {a.job} ended: its ports are free")
    client.close("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
