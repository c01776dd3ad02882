"""The engine-to-engine data channel a KV transfer uses (OrchestrRL §4.3: a migrated request's
cache moves straight from the source instance to the destination, never through Loom).

Loom's MigrateRequests tells the source to release a request and AdmitRequests tells the
destination where to pull its cache from (`kv_source`, the source engine's channel address).
The source parks each released cache here until it is pulled or expires; the destination
pulls it by request id. ZeroMQ REQ/REP over TCP: the address is an ordinary endpoint, and a
pull that finds nothing (expired, or the source restarted) is answered "gone", after which
the destination recomputes the cache from the request's tokens.
"""

import threading
import time
from typing import Any, Dict, List, Optional, Tuple

import zmq

from .generate import pack, unpack
from .model import KvCache

_GONE = b"gone"


class KvServer:
    """The source side: caches released by migrations, served to whoever pulls them."""

    def __init__(self, bind: str = "tcp://127.0.0.1:*", keep_s: float = 120.0):
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(bind)
        self.address: str = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._keep_s = keep_s
        self._parked: Dict[int, Tuple[List[Any], float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kv-server", daemon=True)
        self._thread.start()

    def park(self, request: int, cache: KvCache) -> int:
        """Keeps `cache` for a pull; the bytes it will send."""
        header, body = pack(cache)
        with self._lock:
            self._parked[request] = ([header, body], time.monotonic() + self._keep_s)
        return len(header) + body.nbytes

    def _take(self, request: int) -> List[Any]:
        with self._lock:
            now = time.monotonic()
            for r in [r for r, (_, until) in self._parked.items() if until < now]:
                del self._parked[r]
            frames, _ = self._parked.pop(request, ([_GONE], 0.0))
        return frames

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(100):
                continue
            msg = self._sock.recv()
            try:
                reply = self._take(int(msg.decode()))
            except ValueError:
                reply = [_GONE]
            self._sock.send_multipart(reply, copy=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._sock.close()


def pull(address: str, request: int, timeout_s: float = 30.0,
         device: str = "cpu") -> Optional[KvCache]:
    """The destination side: request `request`'s cache from the engine at `address`; None
    when it is gone or the source does not answer (then recompute from tokens)."""
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, int(timeout_s * 1000))
    try:
        sock.connect(address)
        sock.send(str(request).encode())
        frames = sock.recv_multipart(copy=False)
    except zmq.Again:
        return None
    finally:
        sock.close()
    if len(frames) != 2:
        return None
    return unpack(frames[0].bytes, frames[1].buffer, device)
