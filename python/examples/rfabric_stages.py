#!/usr/bin/python3
"""RFabric (OrchestrRL §5.2) through the Python client: a collective shim announces each stage
of an RL iteration before it starts, and prints Loom's decision as one JSON line per stage.

Against `loom serve` on its embedded defaults (one PoD: h20-0, h20-1, h800-0, h800-1 are
servers 0-3, eight GPUs and two NICs each, a rail-r ToR per NIC under one OCS-Agg):

    python/examples/rfabric_stages.py --endpoint tcp://127.0.0.1:5555 \\
        --server-key var/loom/keys/server.pub --key keys/shim --owner rl-job

Rollout generation all-to-alls among the H20s' GPUs, the weight sync broadcasts from one
H800 GPU to them, training's gradient sync all-reduces over the H800s, each announced at the
window RFabric reconfigures its stage in (§5.3: generation at a deployment boundary, the sync
before its broadcast, training at a stage boundary). First, generation is announced mid-step,
where Loom defers it; at the deployment boundary the shim reports the window alone
(`Fabric.window`) and Loom commits the standing intent there. Exits 1 when no stage got
circuits that serve it (committed or unchanged).
"""

import json
import sys
import os

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from loom_client import Client, service_arguments  # noqa: E402
from loom_client.fabric import Fabric, Rank  # noqa: E402


ROLLOUT = [Rank(s, g) for s in (0, 1) for g in range(8)]
TRAINING = [Rank(s, g) for s in (2, 3) for g in range(8)]


def stages(iterations):
    """RFabric §5.2's stages of each iteration: (stage, primitive, ranks, bytes per rank, the
    window before it)."""
    for _ in range(iterations):
        yield "gen", "all-to-all", ROLLOUT, 2e9, "deployment-boundary"
        yield "weight-sync", "broadcast", [Rank(2, 0)] + ROLLOUT, 14e9, "before-broadcast"
        yield "grad-sync", "all-reduce", TRAINING, 4e9, "stage-boundary"


def report(call, stage, d):
    print(json.dumps({"call": call, "stage": stage, "outcome": d.outcome, "reason": d.reason,
                      "version": d.version, "circuits": d.circuits, "changed": d.changed}),
          flush=True)


def main():
    p = service_arguments("An RL job's stages, announced to Loom's fabric controller")
    p.add_argument("--owner", default="rl-job")
    p.add_argument("--iterations", type=int, default=2)
    p.add_argument("--window-s", type=float, default=5.0,
                   help="the collective-free time before each stage")
    args = p.parse_args()
    client = Client(args.endpoint, args.server_key, args.key)
    served = 0
    try:
        fabric = Fabric.registered(client, args.owner)
        report("intent", "gen", fabric.intent("gen", "all-to-all", ROLLOUT, 2e9, "in-step",
                                               args.window_s))
        report("window", "gen", fabric.window("deployment-boundary", args.window_s))
        for stage, primitive, ranks, size, window in stages(args.iterations):
            d = fabric.intent(stage, primitive, ranks, size, window, args.window_s)
            served += d.serves
            report("intent", stage, d)
    finally:
        client.close()
    return 0 if served else 1


if __name__ == "__main__":
    sys.exit(main())
