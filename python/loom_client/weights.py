"""A sync's weights, moved along Loom's route (WEAVE §5.2): the trainer publishes each new
version on its data channel; the rollout worker the route roots at pulls it over the
cross-cluster link, every rollout worker serves what it pulled to the workers the route hangs
below it, and each tells the trainer it has it. The trainer's sync phase ends when every
receiver of the route has said so, so the phase's measured time is the real transfer.

Weights are named byte buffers with a JSON description (dtype, shape: whatever the framework
needs); this module never looks inside them, so it needs neither torch nor numpy.

  channel ops   b"weights" VERSION        -> [description, name, bytes, name, bytes, ...], or
                                             b"not-yet" (a receiver that is early asks again)
                b"synced" VERSION WORKER  -> b"ok": the worker holds VERSION
"""

import json
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from .data_channel import GONE, DataServer, ask

NOT_YET = b"not-yet"
Blobs = Dict[str, Any]  # name -> a bytes-like buffer (bytes, memoryview)


class WeightChannel:
    """The versions this worker holds (the last `keep`), served on its data channel."""

    def __init__(self, server: DataServer, keep: int = 2):
        self.server, self._keep = server, keep
        self._versions: Dict[int, Tuple[dict, Blobs]] = {}
        self._synced: Dict[int, Set[str]] = {}
        self._changed = threading.Condition()
        server.on(b"weights", self._serve)
        server.on(b"synced", self._hear)

    @property
    def address(self) -> str:
        return self.server.address

    def publish(self, version: int, description: dict, blobs: Blobs) -> None:
        """Holds `version` for the receivers below this worker (older ones beyond `keep` go)."""
        with self._changed:
            self._versions[version] = (description, blobs)
            for old in sorted(self._versions)[:-self._keep]:
                del self._versions[old]
            self._changed.notify_all()

    def get(self, version: int) -> Optional[Tuple[dict, Blobs]]:
        with self._changed:
            return self._versions.get(version)

    def wait_synced(self, version: int, workers: List[str], timeout_s: float) -> Set[str]:
        """Waits until every worker in `workers` said it holds `version`; the ones missing."""
        until = time.monotonic() + timeout_s
        with self._changed:
            while True:
                missing = set(workers) - self._synced.get(version, set())
                left = until - time.monotonic()
                if not missing or left <= 0:
                    return missing
                self._changed.wait(left)

    def _serve(self, args: List[bytes]) -> List[bytes]:
        held = self.get(int(args[0]))
        if held is None:
            return [NOT_YET]
        description, blobs = held
        frames = [json.dumps(description).encode()]
        for name, data in blobs.items():
            frames += [name.encode(), data]
        return frames

    def _hear(self, args: List[bytes]) -> List[bytes]:
        with self._changed:
            self._synced.setdefault(int(args[0]), set()).add(args[1].decode())
            for old in [v for v in self._synced if v < int(args[0]) - self._keep]:
                del self._synced[old]
            self._changed.notify_all()
        return [b"ok"]


def fetch(source: str, version: int, timeout_s: float = 120.0,
          poll_s: float = 0.02) -> Tuple[dict, Blobs]:
    """Pulls `version` from the channel at `source`, asking again while it is not there yet.
    Raises TimeoutError when it does not come within `timeout_s`."""
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        frames = ask(source, [b"weights", str(version).encode()], max(0.1, until - time.monotonic()))
        if frames is not None and bytes(frames[0]) not in (NOT_YET, GONE):
            # the received frames' own memory, not a copy: served on as it came
            blobs = {bytes(frames[i]).decode(): frames[i + 1].buffer
                     for i in range(1, len(frames) - 1, 2)}
            return json.loads(bytes(frames[0])), blobs
        time.sleep(poll_s)
    raise TimeoutError(f"weights version {version} did not come from {source} in {timeout_s} s")


def report_synced(trainer: str, version: int, worker: str, timeout_s: float = 30.0) -> bool:
    """Tells the trainer's channel this worker holds `version`."""
    frames = ask(trainer, [b"synced", str(version).encode(), worker.encode()], timeout_s)
    return frames is not None and bytes(frames[0]) == b"ok"
