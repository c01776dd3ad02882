"""loom-engine-torch: the reference engine, one node's inference server obeying Loom for real.

It registers with Loom as a `gen-instance` of `--gpus` devices (CPU worker processes, or CUDA
devices) and its data channel's address, then every monitoring tick runs one forward on each
instance it leads, reports what finished and each instance's load (GenStats), and obeys:
  Reconfigure DRAIN    every request is let go: parked on the data channel with its tokens and,
                       from a TP1 instance, its KV cache; the ack says how far each got
  Reconfigure RESHARD  the instances it leads in `slots` are built (TPk: k processes, weights
                       re-split); one whose instance and degree stay is kept
  AdmitRequests        new requests fetch their prompts from the router; moved ones pull their
                       tokens (and, with kv_transfer, their KV cache) from the releasing engine,
                       or start from the prompt when that engine is gone
  MigrateRequests      the requests are let go as for a drain
A command seen before is answered as the first time. Outputs go to the router's data channel
before Loom hears RequestsFinished, so a step Loom calls done has every output delivered.

An instance wider than one engine (TP over two nodes) spans the engines its slot names: the lead
publishes a rendezvous on its data channel, and each other engine starts its share of the ranks
there (Reconfigure's `peers` say whose GPUs come first). Expert parallelism and AFD are refused
with why (docs/engines.md).

`loom-engine-torch --profile FILE` measures instead: this engine's decode step times for every
TP degree its devices run, written as Loom's engine profile (profile.py).
"""

import argparse
import dataclasses
import json
import signal
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch

from loom_client import engine_arguments
from loom_client import loom_pb2 as pb
from loom_client.client import Client

from .batching import Batcher, Request
from .config import ModelConfig
from .instance import JOIN_TIMEOUT, Arrival, Instance, Mirrors
from .kv_channel import GONE, DataServer, Parking, ask, pull, unpack_released
from .parallel import free_address, rank_shares
from .profile import write_profile

Ack = Tuple[bool, str, List[pb.RequestProgress], float]
Shares = List[Tuple[str, range]]  # a spanning instance's engines and the ranks each hosts
JOIN_S = JOIN_TIMEOUT.total_seconds()  # the engines of a spanning instance, to meet


@dataclass
class Served:
    """An instance this engine leads, and the RL step and router of each request on it."""

    tp: int
    batcher: Batcher
    step_of: Dict[int, int]
    router_of: Dict[int, str]
    spans: bool = False


def progress(r: Request, kv: bool) -> pb.RequestProgress:
    p = pb.RequestProgress()
    p.request, p.prompt_tokens, p.generated = r.id, len(r.prompt), len(r.output)
    p.kv_resident = kv
    return p


class TorchEngine:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.cfg = model_config(args)
        self.channel = DataServer(f"tcp://{args.host}:*")
        self.parking = Parking()
        self.parking.serve_on(self.channel)
        self.rendezvous: Dict[Tuple[int, int], bytes] = {}  # (instance, epoch) -> where to meet
        self.channel.on(b"rendezvous", self._meeting)
        self.arrived: Dict[Tuple[int, int], set] = {}  # (instance, epoch) -> ranks about to join
        self.channel.on(b"arrive", self._arrival)
        self.followed: Dict[int, Mirrors] = {}  # spanning instances led elsewhere: our ranks
        self.client = Client(args.endpoint, args.server_key, args.key, timeout_s=30.0)
        self.epoch = 0
        self.served: Dict[int, Served] = {}
        self.answered: Dict[int, pb.Envelope] = {}
        self.stop = False

    # -- commands ----------------------------------------------------------------------------

    def _release(self, ids: List[int]) -> List[pb.RequestProgress]:
        """Parks the requests for their destination; their progress as they stood."""
        out = []
        for s in self.served.values():
            for i in [i for i in ids if i in s.step_of]:
                taken = s.batcher.release(i)
                if taken is None:
                    continue
                r, cache = taken
                state = {"prompt": r.prompt, "output": r.output, "max_new": r.max_new}
                self.parking.park(i, state, cache)
                out.append(progress(r, cache is not None))
                del s.step_of[i], s.router_of[i]
        return out

    def _drain(self, r: pb.Reconfigure) -> Ack:
        released = self._release([i for s in self.served.values() for i in s.step_of])
        self.epoch = r.epoch
        return True, "", released, 0.0

    def _reshard(self, r: pb.Reconfigure) -> Ack:
        """Closes what goes; publishes the rendezvous of every spanning instance it leads;
        starts its ranks of those it follows; then builds its own, blocking until their ranks
        joined. Nothing blocks before every lead has published, so two engines that lead and
        follow each other's instances cannot wait on each other."""
        started = time.perf_counter()
        plan = self._plan(r)
        if isinstance(plan, str):
            return False, plan, [], 0.0
        led, follows = plan
        for k in [k for k, s in self.served.items()
                  if k not in led or led[k][0] != s.tp or s.spans or led[k][1]]:
            self.served.pop(k).batcher.instance.close()
        for m in self.followed.values():
            m.close(grace_s=10.0)  # the lead's close stops them; a dead lead's are ended
        self.followed, self.rendezvous, self.arrived = {}, {}, {}
        meets = {k: free_address(self.args.host) for k, (_, shares) in led.items()
                 if shares and k not in self.served}
        for k, address in meets.items():
            self.rendezvous[(k, r.epoch)] = json.dumps(
                {"address": address, "seed": self.args.seed,
                 "model": dataclasses.asdict(self.cfg)}).encode()
        for k, (tp, shares, lead) in follows.items():
            why = self._follow(k, r.epoch, tp, shares, lead)
            if why:
                return False, why, [], 0.0
        for k, (tp, shares) in led.items():
            if k not in self.served:
                if shares and not self._await_arrivals(k, r.epoch, tp, shares):
                    return False, (f"instance {k}: ranks of other engines did not arrive in "
                                   f"{JOIN_S:g} s"), [], 0.0
                local = len(shares[0][1]) if shares else None
                inst = Instance(self.cfg, self.args.seed, tp, self.args.device, local, meets.get(k))
                self.served[k] = Served(tp, Batcher(inst, self.args.max_batch,
                                                    self._kv_capacity(tp)), {}, {}, bool(shares))
        for k, m in self.followed.items():
            if not m.joined(JOIN_S):
                return False, f"instance {k}: this engine's ranks did not join in {JOIN_S:g} s", \
                    [], 0.0
        self.epoch = r.epoch
        return True, "", [], time.perf_counter() - started

    def _plan(self, r: pb.Reconfigure):
        """The instances this engine leads {id: (tp, shares or None)} and follows {id: (tp,
        shares, lead's address)}; or why the reshard cannot be run here."""
        me, peers = self.args.engine_id, {p.engine: p for p in r.peers}
        led: Dict[int, Tuple[int, Optional[Shares]]] = {}
        follows: Dict[int, Tuple[int, Shares, str]] = {}
        for slot in r.slots:
            c = slot.config if slot.HasField("config") else r
            tp, engines = max(c.tp, 1), list(slot.engines)
            if c.ep > 1 or c.ffn_gpus > 0:
                return (f"instance {slot.instance}: EP{c.ep} with {c.ffn_gpus} FFN GPUs asked of "
                        "a dense model (no experts to split): this engine runs TP only")
            if engines == [me]:
                if tp > self.args.gpus:
                    return f"instance {slot.instance}: TP{tp} needs more devices"
                led[slot.instance] = (tp, None)
                continue
            missing = [e for e in engines if e not in peers]
            if missing:
                return f"instance {slot.instance} spans {engines}: no peer entry for {missing}"
            try:
                shares = rank_shares(tp, [(e, peers[e].gpus) for e in engines])
            except ValueError as e:
                return f"instance {slot.instance}: {e}"
            if engines[0] == me:
                led[slot.instance] = (tp, shares)
            else:
                follows[slot.instance] = (tp, shares, peers[engines[0]].data_address)
        return led, follows

    def _follow(self, k: int, epoch: int, tp: int, shares: Shares, lead: str) -> str:
        """Starts this engine's ranks of instance `k` at its lead's rendezvous, with the lead's
        model (the instance's weights are the lead's); why not, or ''."""
        ranks = dict(shares)[self.args.engine_id]
        until = time.monotonic() + JOIN_S
        while True:
            frames = ask(lead, [b"rendezvous", json.dumps([k, epoch]).encode()], 5.0)
            if frames and bytes(frames[0]) != GONE:
                break
            if time.monotonic() > until:
                return f"instance {k}: its lead at {lead} gave no rendezvous in {JOIN_S:g} s"
            time.sleep(0.05)
        meet = json.loads(bytes(frames[0]))
        if ranks:  # an engine gathered beyond the degree hosts none
            self.followed[k] = Mirrors(ModelConfig(**meet["model"]), meet["seed"], tp,
                                       meet["address"], ranks, self.args.device,
                                       Arrival(lead, k, epoch))
            print(f"instance {k}: ranks {ranks.start}-{ranks.stop - 1} of TP{tp} join "
                  f"{meet['address']}", flush=True)
        return ""

    def _await_arrivals(self, k: int, epoch: int, tp: int, shares: Shares) -> bool:
        """Waits, without holding the GIL, until every rank of the other engines is about to
        join instance k (so the lead's own join is short); whether they all came."""
        remote = set(range(len(shares[0][1]), tp))
        until = time.monotonic() + JOIN_S
        while not remote <= self.arrived.get((k, epoch), set()):
            if time.monotonic() > until:
                return False
            time.sleep(0.02)
        return True

    def _arrival(self, args: List[bytes]) -> List[bytes]:
        """A follower's rank about to join instance k of epoch e (the data channel's thread)."""
        k, epoch, rank = json.loads(bytes(args[0]))
        self.arrived.setdefault((int(k), int(epoch)), set()).add(int(rank))
        return [b"ok"]

    def _meeting(self, args: List[bytes]) -> List[bytes]:
        """The data channel's answer to a follower: where instance k of epoch e meets."""
        k, epoch = json.loads(bytes(args[0]))
        return [self.rendezvous.get((int(k), int(epoch)), GONE)]

    def _kv_capacity(self, tp: int) -> int:
        return kv_capacity(self.args, self.cfg, tp)

    def _admit(self, a: pb.AdmitRequests) -> Ack:
        s = self.served.get(a.instance)
        if s is None or a.epoch != self.epoch:
            return False, f"instance {a.instance} of epoch {a.epoch} is not led here", [], 0.0
        fresh = [q.request for q in a.requests if not q.source_address or q.generated == 0]
        prompts = self._prompts(a.router_address, fresh) if fresh else {}
        counts = {"kv": 0, "tokens": 0, "prompt": 0}
        taken = []  # every request's state first: a refused admit runs none of them
        for q in a.requests:
            moved = None if q.request in prompts else self._pull(q, s.tp)
            if moved is None:
                body = prompts.get(q.request) or self._prompts(a.router_address,
                                                               [q.request]).get(q.request)
                if body is None:
                    return False, f"request {q.request}: no prompt at the router", [], 0.0
                moved = ({"prompt": body["prompt"], "output": [], "max_new": body["max_new"]},
                         None)
                counts["prompt"] += 1
            elif moved[0]["output"]:
                counts["kv" if moved[1] is not None else "tokens"] += 1
            taken.append((q.request, moved))
        for i, (state, cache) in taken:
            s.batcher.add(Request(i, state["prompt"], state["max_new"], list(state["output"])),
                          cache)
            s.step_of[i], s.router_of[i] = a.step, a.router_address
        print(f"admitted {len(a.requests)} of step {a.step} on instance {a.instance}: "
              f"{counts['kv']} with their KV, {counts['tokens']} recomputed, {counts['prompt']} "
              "from prompts", flush=True)
        return True, "", [], 0.0

    def _pull(self, q: pb.AdmittedRequest, tp: int):
        """A moved request's state from the engine that let it go (here or elsewhere); its
        cache only with kv_transfer onto a TP1 instance (a TPk one recomputes its shards)."""
        if not q.source_address:
            return None
        if q.kv_source == self.args.engine_id:
            got = unpack_released(self.parking.take(q.request), self.args.device)
        else:
            got = pull(q.source_address, q.request, device=self.args.device)
        if got is None:
            return None
        state, cache = got
        return state, cache if q.kv_transfer and tp == 1 else None

    def _prompts(self, router: str, ids: List[int]) -> Dict[int, dict]:
        frames = ask(router, [b"prompts", json.dumps(ids).encode()]) if router else None
        if not frames or len(frames) != 1:
            return {}
        return {int(k): v for k, v in json.loads(bytes(frames[0])).items()}

    def _migrate(self, m: pb.MigrateRequests) -> Ack:
        return True, "", self._release([mv.request for mv in m.moves]), 0.0

    def _apply(self, env: pb.Envelope) -> Optional[Tuple[int, Ack]]:
        body = env.WhichOneof("body")
        if body == "reconfigure":
            r = env.reconfigure
            run = self._drain if r.phase == pb.RECONFIGURE_PHASE_DRAIN else self._reshard
            return r.command, run(r)
        if body == "admit_requests":
            return env.admit_requests.command, self._admit(env.admit_requests)
        if body == "migrate_requests":
            return env.migrate_requests.command, self._migrate(env.migrate_requests)
        return None

    def _run_command(self, env: pb.Envelope) -> None:
        body = env.WhichOneof("body")
        command = getattr(env, body).command if body in (
            "reconfigure", "admit_requests", "migrate_requests") else None
        if command in self.answered:
            self.client.send(self.answered[command])
            return
        applied = self._apply(env)
        if applied is None:
            return
        command, (ok, detail, released, elapsed) = applied
        what = body if body != "reconfigure" else pb.ReconfigurePhase.Name(
            env.reconfigure.phase).rsplit("_", 1)[-1].lower()
        print(f"command {command} {what}: {'ok' if ok else detail}", flush=True)
        ack = pb.Envelope()
        a = ack.command_ack
        a.deployment, a.command, a.ok, a.detail, a.elapsed_s = (self.args.deployment, command,
                                                                ok, detail, elapsed)
        for p in released:
            a.released.add().CopyFrom(p)
        self.answered[command] = ack
        self.client.send(ack)

    # -- serving -----------------------------------------------------------------------------

    def _finish(self, s: Served, done: List[Request]) -> None:
        """Outputs to their router first, then the finishes to Loom (durable when answered)."""
        by_step: Dict[Tuple[int, str], List[Request]] = {}
        for r in done:
            by_step.setdefault((s.step_of.pop(r.id), s.router_of.pop(r.id)), []).append(r)
        now = time.time_ns()
        for (step, router), reqs in by_step.items():
            outputs = {str(r.id): r.output for r in reqs}
            ask(router, [b"outputs", json.dumps({"step": step, "outputs": outputs}).encode()])
            self.client.requests_finished(self.args.deployment, step,
                                          [(r.id, len(r.output), now) for r in reqs])

    def _stats(self, k: int, s: Served) -> None:
        b = s.batcher
        st = pb.GenStats()
        st.deployment, st.instance, st.epoch = self.args.deployment, k, self.epoch
        st.kv_capacity_tokens, st.max_batch = b.kv_capacity, b.max_batch
        st.kv_free = max(0.0, 1.0 - b.kv_used() / max(b.kv_capacity, 1))
        st.decode_tokens_per_s, st.preemptions = b.decode_rate_tps, b.preemptions
        st.running, st.queued = len(b.running), len(b.waiting)
        for r in b.running.values():
            p = st.requests.add()
            p.CopyFrom(progress(r, True))
            p.running = True
        for r in b.waiting:
            st.requests.add().CopyFrom(progress(r, b.instance.cached(r.id) > 0))
        self.client.gen_stats(st)

    def run(self) -> None:
        torch.manual_seed(self.args.seed)
        self.client.register_engine(self.args.engine_id, self.args.deployment, self.args.gpus,
                                    self.args.node, data_address=self.channel.address)
        tick = max(self.client.stats_interval_ms, 10) / 1000.0
        print(f"engine {self.args.engine_id} registered, data channel {self.channel.address}",
              flush=True)
        next_stats = 0.0
        while not self.stop:
            env = self.client.next_command(0 if any(
                s.step_of for s in self.served.values()) else tick)
            while env is not None:
                self._run_command(env)
                env = self.client.next_command()
            for s in list(self.served.values()):
                if s.step_of:
                    self._finish(s, s.batcher.step())
                else:
                    s.batcher.instance.keep_alive()
            if time.monotonic() >= next_stats:
                for k, s in self.served.items():
                    self._stats(k, s)
                next_stats = time.monotonic() + tick
        for s in self.served.values():
            s.batcher.instance.close()
        for m in self.followed.values():
            m.close()
        self.client.close("stopped")
        self.channel.close()


def model_config(a: argparse.Namespace) -> ModelConfig:
    return ModelConfig(layers=a.layers, hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                       ffn=a.ffn)


def kv_capacity(a: argparse.Namespace, cfg: ModelConfig, tp: int) -> int:
    """KV-cache tokens a TPk instance holds: each of its devices holds its shard of every
    token (kv_bytes_per_token(tp)) within its own budget."""
    return a.kv_bytes // cfg.kv_bytes_per_token(tp)


def model_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """What builds the model and its instances, the same for serving and for profiling."""
    p.add_argument("--device", default="cpu", help="cpu, or cuda where torch sees a GPU")
    p.add_argument("--seed", type=int, default=1, help="the weights' seed")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=256)
    p.add_argument("--kv-bytes", type=int, default=64 << 20,
                   help="KV cache budget per device, in bytes")
    return p


def parse(argv: Optional[List[str]] = None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else argv
    if any(x == "--profile" or x.startswith("--profile=") for x in argv):
        p = model_arguments(argparse.ArgumentParser(
            prog="loom-engine-torch --profile",
            description="Measures this engine's decode step per TP degree; writes Loom's "
                        "engine profile (docs/scenarios.md, Engine profiles)."))
        p.add_argument("--profile", required=True, help="the profile TOML to write")
        p.add_argument("--gpus", type=int, default=2, help="devices: the TP degrees to measure")
        p.add_argument("--profile-model", default="loom-reference",
                       help="the deployment's model name the profile is for")
        p.add_argument("--profile-gpu", default="CPU",
                       help="the deployment's GPU name the profile is for")
        p.add_argument("--profile-batches", type=int, nargs="+", default=[1, 8, 32],
                       help="batch sizes to time (reach the engine's --max-batch)")
        p.add_argument("--profile-contexts", type=int, nargs="+", default=[64, 256, 512],
                       help="context tokens per request to time")
        return p.parse_args(argv)
    p = model_arguments(engine_arguments(__doc__.splitlines()[0], gpus=2,
                                         prog="loom-engine-torch"))
    p.add_argument("--host", default="127.0.0.1", help="the data channel's interface")
    p.add_argument("--max-batch", type=int, default=64)
    p.set_defaults(profile=None)
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse(argv)
    if args.profile:
        cfg = model_config(args)
        write_profile(args, cfg, {tp: kv_capacity(args, cfg, tp) for tp in range(1, args.gpus + 1)})
        return 0
    engine = TorchEngine(args)

    def stop(*_):
        engine.stop = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    engine.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
