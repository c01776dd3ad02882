"""A collective shim's calls into Loom's fabric controller: RFabric's and mFabric's side of the
protocol (docs/protocol.md, "Fabric"), as include/loom/client.hpp's fabric calls.

A framework's shim tells Loom about each communication period before it starts (an intent:
RFabric §5.2's stage and collective, who takes part, how many bytes, and the collective-free
window in which the fabric may change), and Loom answers with what it did to the optical
circuits. A MoE job also reports each layer's expert load (mFabric §5.1), from which Loom
predicts the next all-to-all's skew (App. B).

    fabric = Fabric.registered(client, "rl-job")   # the client becomes its collective shim
    d = fabric.intent("gen", "all-to-all", ranks, bytes_per_rank=2e9,
                      window="deployment-boundary", window_s=1.5)
    if d.serves: ...   # committed or unchanged: the circuits serve the period

Ranks are `Rank(server, gpu)`: `server` is the server's position in serve's config, counting
the `servers` of every `[[fabric.pods]]` table in file order from 0 (ranges expanded); `gpu` is
the GPU on it, whose NIC (and so rail) is gpu * nics_per_server / gpus of the server.
"""

import collections
import dataclasses
from typing import Iterable, Sequence

from . import loom_pb2 as pb

STAGES = {
    "train": pb.FABRIC_STAGE_TRAIN,
    "grad-sync": pb.FABRIC_STAGE_GRAD_SYNC,
    "gen": pb.FABRIC_STAGE_GEN,
    "weight-sync": pb.FABRIC_STAGE_WEIGHT_SYNC,
}
PRIMITIVES = {
    "all-reduce": pb.PRIMITIVE_ALL_REDUCE,
    "all-gather": pb.PRIMITIVE_ALL_GATHER,
    "reduce-scatter": pb.PRIMITIVE_REDUCE_SCATTER,
    "all-to-all": pb.PRIMITIVE_ALL_TO_ALL,
    "broadcast": pb.PRIMITIVE_BROADCAST,
    "send-recv": pb.PRIMITIVE_SEND_RECV,
    "m2n": pb.PRIMITIVE_M2N,
}
WINDOWS = {
    "stage-boundary": pb.WINDOW_KIND_STAGE_BOUNDARY,
    "iteration-boundary": pb.WINDOW_KIND_ITERATION_BOUNDARY,
    "deployment-boundary": pb.WINDOW_KIND_DEPLOYMENT_BOUNDARY,
    "before-broadcast": pb.WINDOW_KIND_BEFORE_BROADCAST,
    "in-step": pb.WINDOW_KIND_IN_STEP,
}
OUTCOMES = {
    pb.FABRIC_OUTCOME_COMMITTED: "committed",
    pb.FABRIC_OUTCOME_UNCHANGED: "unchanged",
    pb.FABRIC_OUTCOME_DEFERRED: "deferred",
    pb.FABRIC_OUTCOME_KEPT: "kept",
}

Rank = collections.namedtuple("Rank", "server gpu")
Rank.__doc__ = "A GPU of the fabric: the server's index (see the module) and the GPU on it."


@dataclasses.dataclass(frozen=True)
class Decision:
    """Loom's answer to an intent. `outcome`: committed (the circuits changed and are up),
    unchanged (they already serve it), deferred (the window is too short for the change, or
    the stage does not reconfigure at that kind of window, RFabric §5.3: the intent waits for
    the owner's next window), kept (no plan fits, or a device it needs is
    down: the previous circuits stay, the intent is tried again at the next window). `reason`
    says why, always. `exposed_s`: the part of the reconfiguration the window does not hide."""

    outcome: str
    reason: str
    version: int
    circuits: int
    changed: int
    reconfig_s: float
    exposed_s: float

    @property
    def serves(self) -> bool:
        """The committed circuits are the ones this intent asked for."""
        return self.outcome in ("committed", "unchanged")


class Fabric:
    """The fabric calls of one owner (a job or a deployment) over a Client registered as
    collective-shim. Names are checked here, so a typo fails before it reaches the wire."""

    def __init__(self, client, owner: str):
        self.client, self.owner = client, owner

    @classmethod
    def registered(cls, client, owner: str, worker_id: str = "") -> "Fabric":
        """Registers `client` as the collective shim of `owner` (worker id `OWNER-shim` by
        default) and returns its calls."""
        client.register("collective-shim", worker_id or f"{owner}-shim", job=owner)
        return cls(client, owner)

    def intent(self, stage: str, primitive: str, members: Sequence[Rank], bytes_per_rank: float,
               window: str, window_s: float = 0.0, group_size: int = 0,
               receive_weights: Iterable[float] = (), predicted: bool = False,
               iteration: int = 0, layer: int = 0) -> Decision:
        """The next communication period (RFabric §5.2): `stage` (train, grad-sync, gen,
        weight-sync), `primitive` (all-reduce, all-gather, reduce-scatter, all-to-all,
        broadcast, send-recv, m2n) among `members` in consecutive groups of `group_size` (0:
        one group), `bytes_per_rank` each, after a collective-free `window` (stage-boundary,
        iteration-boundary, deployment-boundary, before-broadcast, in-step) of `window_s`.
        An all-to-all may be skewed by `receive_weights` (one per member), or `predicted` from
        the expert loads reported for `layer` of `iteration` (mFabric App. B). Blocks until
        Loom decided; a refused intent raises LoomError (INVALID, UNAUTHORIZED)."""
        env = pb.Envelope()
        w = env.fabric_intent
        w.owner = self.owner
        w.stage_kind = _named(STAGES, stage, "stage")
        w.primitive_kind = _named(PRIMITIVES, primitive, "primitive")
        w.window_kind = _named(WINDOWS, window, "window")
        w.window_s, w.bytes, w.group_size = window_s, bytes_per_rank, group_size
        for server, gpu in members:
            m = w.members.add()
            m.server, m.gpu = server, gpu
        w.receive_weights.extend(receive_weights)
        w.predicted, w.iteration, w.layer = predicted, iteration, layer
        return _decision(self.client.call(env).fabric_decision)

    def window(self, window: str, window_s: float) -> Decision:
        """The owner is at a collective-free `window` of `window_s` with no new intent: Loom
        tries the standing one (deferred or kept: its decision said so) in it. Without this,
        a kept intent waits for the owner's next intent."""
        env = pb.Envelope()
        env.fabric_window.owner = self.owner
        env.fabric_window.window_kind = _named(WINDOWS, window, "window")
        env.fabric_window.window_s = window_s
        return _decision(self.client.call(env).fabric_decision)

    def expert_load(self, iteration: int, layer: int, tokens: Sequence[float]) -> None:
        """MoE layer `layer`'s dispatch in `iteration`: the tokens each member of this owner's
        all-to-all received, in member order (mFabric §5.1). Returns once Loom recorded it."""
        env = pb.Envelope()
        env.expert_load.owner = self.owner
        env.expert_load.iteration = iteration
        env.expert_load.layer = layer
        env.expert_load.tokens.extend(tokens)
        self.client.call(env)


def _decision(d) -> Decision:
    return Decision(OUTCOMES.get(d.outcome_kind, d.outcome), d.reason, d.version, d.circuits,
                    d.changed, d.reconfig_s, d.exposed_s)


def _named(table, name, what):
    if name not in table:
        raise ValueError(f"{what} must be one of {', '.join(table)}, not {name!r}")
    return table[name]
