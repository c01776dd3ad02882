#!/usr/bin/env python3
"""An inference engine for a Loom generation deployment (OrchestrRL §4, role gen-instance),
on the raw client: the skeleton an adapter for a real engine follows.

It registers with its GPUs, then on every monitoring tick reports each instance it leads
(GenStats) and the requests it finished (RequestsFinished), and obeys Loom's commands:
  Reconfigure DRAIN    stop every instance, answer with what each request had generated
  Reconfigure RESHARD  load the shards of the instances in `slots` (the ones it leads serve)
  AdmitRequests        run these requests on an instance it leads
  MigrateRequests      release these requests (Loom admits them elsewhere)
Each command is answered with a CommandAck carrying its id; a command seen before gets the
same answer again (Loom sends a command again when an answer is lost).

Its "model" is a toy: every running request gains --tokens-per-s tokens a second and finishes
after --tokens; a vLLM adapter would read the same numbers from the engine's scheduler
(docs/protocol.md maps each field).
"""

import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from loom_client import engine_arguments  # noqa: E402
from loom_client import loom_pb2 as pb  # noqa: E402
from loom_client.client import Client  # noqa: E402


class Engine:
    def __init__(self, args):
        self.args = args
        self.client = Client(args.endpoint, args.server_key, args.key, timeout_s=30.0)
        self.lock = threading.Lock()
        self.commands = []
        self.epoch = 0
        self.instances = {}   # instance -> {request: [prompt, generated, step]}
        self.answered = {}    # command -> CommandAck, for repeats
        self.finished = []    # (step, request, output, finished_at_ns)
        self.stop = False
        self.client.on_command(self._queue)

    def _queue(self, env):
        with self.lock:
            self.commands.append(env)

    def _progress(self, request, prompt, generated, running=True):
        p = pb.RequestProgress()
        p.request, p.prompt_tokens, p.generated = request, prompt, generated
        p.running = p.kv_resident = running
        return p

    def _release(self, ids):
        released = []
        for requests in self.instances.values():
            for request in [r for r in ids if r in requests]:
                prompt, generated, _ = requests.pop(request)
                released.append(self._progress(request, prompt, int(generated)))
        return released

    def _apply(self, env):
        body = env.WhichOneof("body")
        if body == "reconfigure":
            r = env.reconfigure
            if r.phase == pb.RECONFIGURE_PHASE_DRAIN:
                released = self._release([q for reqs in self.instances.values() for q in reqs])
                self.instances, self.epoch = {}, r.epoch
                return r.command, True, "", released
            self.epoch = r.epoch
            self.instances = {s.instance: {} for s in r.slots if s.engines[0] == self.args.engine_id}
            return r.command, True, "", []
        if body == "admit_requests":
            a = env.admit_requests
            if a.instance not in self.instances or a.epoch != self.epoch:
                return a.command, False, f"instance {a.instance} is not led here", []
            for q in a.requests:
                self.instances[a.instance][q.request] = [q.prompt_tokens, q.generated, a.step]
            return a.command, True, "", []
        if body == "migrate_requests":
            m = env.migrate_requests
            return m.command, True, "", self._release([mv.request for mv in m.moves])
        return None

    def _answer(self, command, ok, detail, released):
        ack = self.answered.get(command)
        if ack is None:
            ack = pb.CommandAck()
            ack.deployment, ack.command, ack.ok, ack.detail = (self.args.deployment, command, ok,
                                                                detail)
            for r in released:
                ack.released.add().CopyFrom(r)
            self.answered[command] = ack
        env = pb.Envelope()
        env.command_ack.CopyFrom(ack)
        self.client.send(env)

    def _run_commands(self):
        with self.lock:
            batch, self.commands = self.commands, []
        for env in batch:
            applied = None
            body = env.WhichOneof("body")
            command = getattr(env, body).command if body in ("reconfigure", "admit_requests",
                                                             "migrate_requests") else None
            if command is not None and command in self.answered:
                self._answer(command, True, "", [])
                continue
            applied = self._apply(env)
            if applied:
                print(f"command {applied[0]} {body}: {'ok' if applied[1] else applied[2]}",
                      flush=True)
                self._report_finished()
                self._answer(*applied)

    def _advance(self, dt):
        for requests in self.instances.values():
            for request, entry in list(requests.items()):
                entry[1] += dt * self.args.tokens_per_s
                if entry[1] >= self.args.tokens:
                    del requests[request]
                    self.finished.append((entry[2], request, self.args.tokens, time.time_ns()))

    def _report_finished(self):
        by_step = {}
        for step, request, output, at_ns in self.finished:
            by_step.setdefault(step, []).append((request, output, at_ns))
        self.finished = []
        for step, done in by_step.items():
            print(f"finished {len(done)} of step {step}", flush=True)
            self.client.requests_finished(self.args.deployment, step, done)

    def _stats(self):
        for instance, requests in self.instances.items():
            s = pb.GenStats()
            s.deployment, s.instance, s.epoch = self.args.deployment, instance, self.epoch
            s.kv_capacity_tokens, s.max_batch = 1_000_000, 256
            s.kv_free = 1.0 - min(1.0, sum(p + g for p, g, _ in requests.values()) / 1e6)
            s.decode_tokens_per_s = self.args.tokens_per_s
            for request, (prompt, generated, _) in requests.items():
                s.requests.add().CopyFrom(self._progress(request, prompt, int(generated)))
            self.client.gen_stats(s)

    def run(self):
        self.client.register_engine(self.args.engine_id, self.args.deployment, self.args.gpus,
                                    self.args.node)
        interval = max(self.client.stats_interval_ms, 10) / 1000.0
        print(f"engine {self.args.engine_id} registered (tick {interval * 1000:.0f} ms)",
              flush=True)
        last = time.monotonic()
        while not self.stop:
            self._run_commands()
            now = time.monotonic()
            self._advance(now - last)
            last = now
            self._report_finished()
            self._stats()
            time.sleep(interval)
        self.client.close("stopped")


def main():
    p = engine_arguments(__doc__.splitlines()[0], gpus=8)
    p.add_argument("--tokens", type=int, default=64, help="every request's output length")
    p.add_argument("--tokens-per-s", type=float, default=200.0)
    engine = Engine(p.parse_args())

    def stop(*_):
        engine.stop = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    engine.run()


if __name__ == "__main__":
    main()
