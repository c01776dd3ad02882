"""The framework's router for a Loom generation deployment: what veRL's or slime's rollout
manager does around an inference engine, written against loom.v1 so a framework can copy it.

A step: the router serves its prompts on its data channel, sends StepStart (ids and prompt
lengths only, with the channel's address), and waits for StepDone. Loom places each request
and moves it as it sees fit (reshards, migrations, lost engines); whichever engine runs a
request fetches its prompt here and, when it finishes, delivers the output here before Loom
hears of it, so StepDone means every output is in hand. The ids are the router's: unique
within the step (docs/protocol.md).

   python3 -m loom_torch.router --deployment D --prompts N   (prints one JSON line)
"""

import json
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

from loom_client import loom_pb2 as pb
from loom_client import service_arguments
from loom_client.client import Client, LoomError

from .kv_channel import DataServer

Prompt = Tuple[List[int], int]  # tokens, max new tokens


class StepFailed(Exception):
    """The step ended unfinished (aborted by its timeout or an operator) or never ended."""


class Router:
    ASK_AGAIN_S = 5.0

    def __init__(self, client: Client, deployment: str, router_id: str = "router",
                 host: str = "127.0.0.1"):
        self.client, self.deployment = client, deployment
        self.channel = DataServer(f"tcp://{host}:*")
        self._lock = threading.Lock()
        self._prompts: Dict[int, Prompt] = {}
        self._outputs: Dict[int, List[int]] = {}
        self._step: Optional[int] = None
        self.channel.on(b"prompts", self._serve_prompts)
        self.channel.on(b"outputs", self._take_outputs)
        client.register_router(router_id, deployment)

    def _serve_prompts(self, args: List[bytes]) -> List[bytes]:
        with self._lock:
            body = {str(i): {"prompt": self._prompts[i][0], "max_new": self._prompts[i][1]}
                    for i in json.loads(args[0]) if i in self._prompts}
        return [json.dumps(body).encode()]

    def _take_outputs(self, args: List[bytes]) -> List[bytes]:
        msg = json.loads(args[0])
        with self._lock:
            if msg["step"] == self._step:  # a late delivery for an earlier step is dropped
                for i, tokens in msg["outputs"].items():
                    self._outputs[int(i)] = tokens
        return [b"ok"]

    def run_step(self, step: int, prompts: Dict[int, Prompt],
                 timeout_s: float = 600.0) -> Dict[int, List[int]]:
        """Runs one step's batch under Loom; every request's output tokens."""
        with self._lock:
            self._step, self._prompts, self._outputs = step, dict(prompts), {}
        if not self._start(step, timeout_s).done:
            self._await_done(step, timeout_s)
        with self._lock:
            missing = [i for i in prompts if i not in self._outputs]
            if missing:
                raise StepFailed(f"step {step} ended without {len(missing)} outputs")
            return dict(self._outputs)

    def _start(self, step: int, timeout_s: float = 600.0):
        """StepStart; while no engine is registered yet (UNAVAILABLE), again every half
        second, as a framework waits for its inference servers to come up."""
        with self._lock:
            sizes = [(i, len(p[0])) for i, p in self._prompts.items()]
        until = time.monotonic() + timeout_s
        while True:
            try:
                return self.client.start_step(self.deployment, step, sizes,
                                              data_address=self.channel.address)
            except LoomError as e:
                if e.code != pb.ERROR_UNAVAILABLE or time.monotonic() > until:
                    raise
                time.sleep(0.5)

    def _await_done(self, step: int, timeout_s: float) -> None:
        until = time.monotonic() + timeout_s
        ask_again = time.monotonic() + self.ASK_AGAIN_S
        while time.monotonic() < until:
            env = self.client.next_command(1.0)
            if env is None and time.monotonic() >= ask_again:
                # A StepDone sent while this router was away (the service restarted) is lost:
                # StepStart sent again answers `done` for a finished step (docs/protocol.md).
                if self._start(step).done:
                    return
                ask_again = time.monotonic() + self.ASK_AGAIN_S
            if env is None or env.WhichOneof("body") != "step_done":
                continue
            if env.step_done.step != step:
                continue
            if env.step_done.aborted:
                raise StepFailed(f"step {step} aborted: {env.step_done.reason}")
            return
        raise StepFailed(f"step {step} not done after {timeout_s:.0f} s")

    def close(self) -> None:
        self.client.close("done")
        self.channel.close()


def main(argv: Optional[List[str]] = None) -> int:
    p = service_arguments(__doc__.splitlines()[0], prog="loom-router-torch")
    p.add_argument("--deployment", required=True)
    p.add_argument("--step", type=int, default=0)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--max-new", type=int, default=32)
    args = p.parse_args(argv)
    from .tokenizer import encode
    router = Router(Client(args.endpoint, args.server_key, args.key), args.deployment)
    prompts = {i: (encode(f"prompt {i}: " + "x" * (i % 7)), args.max_new)
               for i in range(args.prompts)}
    started = time.monotonic()
    outputs = router.run_step(args.step, prompts)
    print(json.dumps({"step": args.step, "requests": len(outputs),
                      "tokens": sum(len(o) for o in outputs.values()),
                      "seconds": round(time.monotonic() - started, 3)}), flush=True)
    router.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
