"""The data channel between engines and the router: request bodies and KV caches travel here,
never through Loom (OrchestrRL §4.3: a migrated request's cache moves straight from the source
instance to the destination; loom.v1 carries ids, lengths and addresses only).

Each engine and the router serve one ZeroMQ REP socket (its `data_address`, announced in its
Register or StepStart). A request is a list of frames, the first naming what is asked:
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
from typing import Any, Callable, Dict, List, Optional, Tuple

import zmq

from .generate import pack, unpack
from .model import KvCache

GONE = b"gone"
Handler = Callable[[List[bytes]], List[Any]]


class DataServer:
    """A REP socket answering named requests on its own thread."""

    def __init__(self, bind: str = "tcp://127.0.0.1:*"):
        self._sock = zmq.Context.instance().socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(bind)
        self.address: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._handlers: Dict[bytes, Handler] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="data-channel", daemon=True)
        self._thread.start()

    def on(self, op: bytes, handler: Handler) -> None:
        """`handler(args)` answers requests named `op` (runs on the channel's thread)."""
        self._handlers[op] = handler

    def _answer(self, frames: List[bytes]) -> List[Any]:
        handler = self._handlers.get(frames[0]) if frames else None
        if handler is None:
            return [GONE]
        try:
            return handler(frames[1:])
        except (ValueError, KeyError) as e:  # a malformed request: answered, never fatal
            return [GONE, str(e).encode()]

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if poller.poll(100):
                self._sock.send_multipart(self._answer(self._sock.recv_multipart()), copy=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def ask(address: str, frames: List[bytes], timeout_s: float = 30.0) -> Optional[List[zmq.Frame]]:
    """One request to a data channel; None when it does not answer in time."""
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout_s * 1000))
    try:
        sock.connect(address)
        sock.send_multipart(frames)
        return sock.recv_multipart(copy=False)
    except zmq.Again:
        return None
    finally:
        sock.close()


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
