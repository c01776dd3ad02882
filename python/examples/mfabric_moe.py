#!/usr/bin/python3
"""mFabric (§5.1, App. B) through the Python client: a MoE job's shim reports each layer's
expert load and announces the next layer's expert-parallel all-to-all with `predicted`, so that
Loom shapes the regional OCS for the load its traffic monitor forecasts. One JSON line per
decision.

Against `loom serve -c conf/mfabric-region.toml` (servers 0-7 are moe-0..7 in the EP region,
eight GPUs each, four NICs of each on the regional OCS):

    python/examples/mfabric_moe.py --endpoint tcp://127.0.0.1:5555 \\
        --server-key var/mfabric/keys/server.pub --key keys/shim --owner moe

Experts live on servers 0-3; the load is skewed toward server 0's GPUs. Exits 1 when no
all-to-all got circuits that serve it.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from loom_client import Client, service_arguments  # noqa: E402
from loom_client.fabric import Fabric, Rank  # noqa: E402

EP = [Rank(s, g) for s in range(4) for g in range(8)]


def load(layer):
    """Tokens each EP member received in `layer`: a hot expert on server 0, shifting by layer."""
    return [4000.0 if m.server == 0 and m.gpu == layer % 8 else 500.0 for m in EP]


def main():
    p = service_arguments("A MoE job's expert loads and predicted all-to-alls")
    p.add_argument("--owner", default="moe")
    p.add_argument("--layers", type=int, default=3)
    args = p.parse_args()
    client = Client(args.endpoint, args.server_key, args.key)
    served = 0
    try:
        fabric = Fabric.registered(client, args.owner)
        for layer in range(args.layers):
            # App. B: the first all-to-all of a layer runs before its gating, on the forecast
            d = fabric.intent("train", "all-to-all", EP, 4e9, "stage-boundary", 1.0,
                              predicted=True, iteration=1, layer=layer)
            fabric.expert_load(1, layer, load(layer))
            served += d.serves
            print(json.dumps({"layer": layer, "outcome": d.outcome, "reason": d.reason,
                              "version": d.version, "circuits": d.circuits}), flush=True)
    finally:
        client.close()
    return 0 if served else 1


if __name__ == "__main__":
    sys.exit(main())
