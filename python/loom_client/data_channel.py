"""Data channels between workers: bytes that must not pass through Loom's control plane
(KV caches of moved requests, OrchestrRL §4.3; a sync's weights, WEAVE §5.2) go from one
worker's REP socket to another's REQ. loom.v1 carries only the addresses (Register.data_address).

A request is a list of frames, the first naming what is asked; a handler answers it on the
channel's own thread, so a handler never blocks (a receiver that is early asks again).
Whatever is not known is answered b"gone".
"""

import threading
from typing import Any, Callable, Dict, List, Optional

import zmq

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
