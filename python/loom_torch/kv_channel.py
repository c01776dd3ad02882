"""The data channel between engines and the router: request bodies and KV caches travel here,
never through Loom (OrchestrRL §4.3: a migrated request's cache moves straight from the source
instance to the destination; loom.v1 carries ids, lengths and addresses only).

Each engine and the router serve one data channel (`loom_client.data_channel`) at its
`data_address`, announced in its Register or StepStart. What is asked of it:
  engine  b"released" ID  -> a request it let go (migration or drain): its state as JSON, then
                             its KV cache (pack()'s header and body) when it kept one whole
  router  b"prompts" JSON -> the prompts (tokens, max_new) of the ids asked for
  router  b"outputs" JSON -> takes the outputs an engine finished
Whatever is not known is answered b"gone": a destination then recomputes from what the router
has (a source that restarted, or a request pulled twice).
"""

import json
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import zmq

from loom_client.data_channel import GONE, DataServer, ask

from .generate import pack, unpack
from .model import KvCache

class Parking:
    """Requests an engine let go, kept for the destination's pull or until they expire."""

    def __init__(self, keep_s: float = 120.0):
        self._keep_s = keep_s
        self._parked: Dict[int, Tuple[List[Any], float]] = {}
        self._lock = threading.Lock()

    def park(self, request: int, state: Dict[str, Any], cache: Optional[KvCache]) -> int:
        """Keeps the request's state (and its cache, when whole here); the bytes of the cache."""
        frames: List[Any] = [json.dumps(state).encode()]
        if cache is not None:
            header, body = pack(cache)
            frames += [header, body]
        with self._lock:
            self._parked[request] = (frames, time.monotonic() + self._keep_s)
        return sum(len(f) if isinstance(f, bytes) else f.nbytes for f in frames[1:])

    def take(self, request: int) -> List[Any]:
        """The frames of a parked request, once; [GONE] when it is not here."""
        with self._lock:
            now = time.monotonic()
            for r in [r for r, (_, until) in self._parked.items() if until < now]:
                del self._parked[r]
            frames, _ = self._parked.pop(request, ([GONE], 0.0))
        return frames

    def serve_on(self, server: DataServer) -> None:
        server.on(b"released", lambda args: self.take(int(args[0].decode())))


def unpack_released(frames: List[Any], device: str = "cpu"
                    ) -> Optional[Tuple[Dict[str, Any], Optional[KvCache]]]:
    """A released request's (state, cache or None) from its frames; None when gone."""
    if not frames or bytes(frames[0]) == GONE:
        return None
    state = json.loads(bytes(frames[0]))
    if len(frames) < 3:
        return state, None
    body = frames[2].buffer if isinstance(frames[2], zmq.Frame) else frames[2]
    return state, unpack(bytes(frames[1]), body, device)


def pull(address: str, request: int, timeout_s: float = 30.0,
         device: str = "cpu") -> Optional[Tuple[Dict[str, Any], Optional[KvCache]]]:
    """The destination side: request `request` from the engine at `address`."""
    frames = ask(address, [b"released", str(request).encode()], timeout_s)
    return None if frames is None else unpack_released(frames, device)
