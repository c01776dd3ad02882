"""Loom's Python worker client (loom.v1 over ZeroMQ), for veRL/ROLL-style workers.

Only Debian's python3-zmq and python3-protobuf are needed. The protocol module loom_pb2 is
generated from proto/loom.proto by the build (build/python/loom_client/loom_pb2.py); put
build/python on PYTHONPATH.

    client = Client("tcp://127.0.0.1:5555", server_key="KEYS/server.pub", key="KEYS/worker")
    client.register("rollout", "w0", job="math-7b")
    grant = client.acquire("math-7b", "rollout")     # blocks until Loom grants the phase
    ...
    client.release("math-7b", "rollout", solo_s=12.5)
"""

import threading
import time

import zmq

from . import loom_pb2 as pb

PROTOCOL_VERSION = 1

_ROLES = {
    "rollout": pb.ROLE_ROLLOUT,
    "train": pb.ROLE_TRAIN,
    "gen-instance": pb.ROLE_GEN_INSTANCE,
    "collective-shim": pb.ROLE_COLLECTIVE_SHIM,
    "ocs-agent": pb.ROLE_OCS_AGENT,
    "admin": pb.ROLE_ADMIN,
}
_PHASES = {"rollout": pb.PHASE_ROLLOUT, "training": pb.PHASE_TRAINING, "sync": pb.PHASE_SYNC}


class LoomError(Exception):
    """The service answered with a typed error (loom.v1.Error)."""

    def __init__(self, code, message):
        super().__init__(f"{pb.ErrorCode.Name(code)}: {message}")
        self.code = code
        self.message = message


class Restarted(LoomError):
    """The service restarted and the session was re-established: restart the iteration."""

    def __init__(self):
        super().__init__(pb.ERROR_NOT_REGISTERED,
                         "session re-established after a service restart: restart the iteration")


def read_key(path):
    with open(path) as f:
        return f.read().strip()


def worker_arguments(description):
    """An argparse parser with what every worker needs: the endpoint, the keys, the job and
    how many iterations to run."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--endpoint", default="tcp://127.0.0.1:5555")
    p.add_argument("--server-key", help="the service's public key file (omit if insecure)")
    p.add_argument("--key", help="this worker's key pair prefix (KEY.pub, KEY.secret)")
    p.add_argument("--job", required=True)
    p.add_argument("--iterations", type=int, default=3)
    return p


class Client:
    """One DEALER connection, thread-safe: callers hold the socket only for short poll slices,
    so heartbeats (a thread of their own) interleave with a blocking acquire. ZeroMQ reconnects
    with backoff (100 ms to 5 s). Commands are kept for next_command()."""

    def __init__(self, endpoint, server_key=None, key=None, timeout_s=30.0):
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.DEALER)
        self._sock.setsockopt(zmq.LINGER, 0)
        if server_key:
            self._sock.curve_serverkey = read_key(server_key).encode()
            self._sock.curve_publickey = read_key(key + ".pub").encode()
            self._sock.curve_secretkey = read_key(key + ".secret").encode()
        self._sock.connect(endpoint)
        self._sock.setsockopt(zmq.RECONNECT_IVL, 100)
        self._sock.setsockopt(zmq.RECONNECT_IVL_MAX, 5000)
        self._lock = threading.Lock()
        self._next = 1
        self._commands = []
        self._replies = {}
        self._registration = None
        self._timeout_s = timeout_s
        self._beats = None
        self.heartbeat_ms = 2000

    def _pump(self, timeout_s):
        """One poll slice under the socket lock: replies are filed by request id."""
        with self._lock:
            if not self._sock.poll(int(max(timeout_s, 0) * 1000)):
                return
            while True:
                try:
                    data = self._sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                env = pb.Envelope()
                env.ParseFromString(data)
                if env.request_id:
                    self._replies[env.request_id] = env
                else:
                    self._commands.append(env)

    def _request(self, env, timeout_s):
        with self._lock:
            rid = self._next
            self._next += 1
            env.version = PROTOCOL_VERSION
            env.request_id = rid
            self._sock.send(env.SerializeToString())
        deadline = time.monotonic() + timeout_s
        while rid not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no reply to {env.WhichOneof('body')} in {timeout_s} s")
            # Short slices: heartbeats and other callers get the socket in between.
            self._pump(min(left, 0.02))
        return self._replies.pop(rid)

    def call(self, env, timeout_s=None):
        """Sends a request and returns its reply; raises LoomError on an Error reply and
        TimeoutError when none comes. A restarted service that lost the session gets a new
        Register under the same worker id, then the request again."""
        timeout_s = self._timeout_s if timeout_s is None else timeout_s
        reply = self._request(env, timeout_s)
        if (reply.WhichOneof("body") == "error" and reply.error.code == pb.ERROR_NOT_REGISTERED
                and self._registration is not None):
            again = pb.Envelope()
            again.CopyFrom(self._registration)
            if self._request(again, timeout_s).WhichOneof("body") == "registered":
                # The restarted service re-admits the job from an iteration's start: a phase
                # in flight is not resent, the caller restarts its iteration.
                if env.WhichOneof("body") in ("phase_acquire", "phase_release"):
                    raise Restarted()
                reply = self._request(env, timeout_s)
        if reply.WhichOneof("body") == "error":
            raise LoomError(reply.error.code, reply.error.message)
        return reply

    def send(self, env):
        with self._lock:
            env.version = PROTOCOL_VERSION
            self._sock.send(env.SerializeToString())

    def next_command(self, timeout_s=0.0):
        if not self._commands:
            self._pump(timeout_s)
        return self._commands.pop(0) if self._commands else None

    def register(self, role, worker_id, job="", node=""):
        env = pb.Envelope()
        env.register.role = _ROLES[role]
        env.register.worker_id = worker_id
        env.register.job = job
        env.register.node = node
        reply = self.call(env).registered
        self._registration = env
        self.heartbeat_ms = reply.heartbeat_ms
        self._start_heartbeats()
        return reply

    def _start_heartbeats(self):
        if self._beats:
            return
        self._stop = threading.Event()

        def beat():
            while not self._stop.wait(self.heartbeat_ms / 2000.0):
                env = pb.Envelope()
                env.heartbeat.SetInParent()
                self.send(env)

        self._beats = threading.Thread(target=beat, daemon=True)
        self._beats.start()

    def acquire(self, job, phase, timeout_s=None):
        """WEAVE §5.1: blocks until Loom grants the phase."""
        env = pb.Envelope()
        env.phase_acquire.job = job
        env.phase_acquire.phase = _PHASES[phase]
        return self.call(env, timeout_s).phase_grant

    def release(self, job, phase, solo_s):
        env = pb.Envelope()
        env.phase_release.job = job
        env.phase_release.phase = _PHASES[phase]
        env.phase_release.solo_s = solo_s
        self.call(env)

    def progress(self, job, done, total):
        env = pb.Envelope()
        env.progress.job = job
        env.progress.responses_done = done
        env.progress.responses_total = total
        self.send(env)

    def close(self, reason="done", job_finished=False):
        """Says goodbye; job_finished tells Loom the job is complete (it leaves its group)."""
        if self._beats:
            self._stop.set()
            self._beats.join()
            self._beats = None
        env = pb.Envelope()
        env.goodbye.reason = reason
        env.goodbye.job_finished = job_finished
        self.send(env)
        self._sock.close()
