"""A real etcd cluster on loopback (Debian's etcd-server 3.4) for the HA suites: members
started, killed and started again as real processes, each with its own data folder."""

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from typing import List, Optional

SCALE = float(os.environ.get("LOOM_TEST_TIME_SCALE", "1"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdCluster:
    """`size` members named e0.., in `work`; every member's client URL is in `urls`."""

    def __init__(self, work: str, size: int = 3):
        self.work = work
        self.names = [f"e{i}" for i in range(size)]
        self.procs = {}
        self.logs = {}
        for attempt in range(3):
            self.client = {n: f"http://127.0.0.1:{free_port()}" for n in self.names}
            self.peer = {n: f"http://127.0.0.1:{free_port()}" for n in self.names}
            for n in self.names:
                self.start(n, new=True)
            try:
                self.wait_healthy()
                return
            except AssertionError:
                exited = [n for n, p in self.procs.items() if p.poll() is not None]
                if attempt == 2 or not exited:
                    raise
                # A port picked free was taken before its member bound it (suites run two at
                # a time): a new cluster on fresh ports and folders.
                self.stop_all()
                for n in self.names:
                    shutil.rmtree(os.path.join(self.work, n), ignore_errors=True)

    @property
    def urls(self) -> List[str]:
        return [self.client[n] for n in self.names]

    def start(self, name: str, new: bool = False) -> None:
        initial = ",".join(f"{n}={self.peer[n]}" for n in self.names)
        log = open(os.path.join(self.work, f"{name}.log"), "a")
        self.logs[name] = log
        self.procs[name] = subprocess.Popen(
            ["/usr/bin/etcd", "--name", name, "--data-dir", os.path.join(self.work, name),
             "--listen-client-urls", self.client[name], "--advertise-client-urls",
             self.client[name], "--listen-peer-urls", self.peer[name],
             "--initial-advertise-peer-urls", self.peer[name], "--initial-cluster", initial,
             "--initial-cluster-state", "new", "--initial-cluster-token", "loom-ha-test",
             "--logger", "zap", "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT)

    def kill(self, name: str) -> None:
        self.procs[name].kill()
        self.procs[name].wait(30)

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(30)
        for log in self.logs.values():
            log.close()

    def healthy(self, name: str) -> bool:
        try:
            with urllib.request.urlopen(self.client[name] + "/health", timeout=1) as r:
                return b'"true"' in r.read()
        except OSError:
            return False

    def wait_healthy(self, names: Optional[List[str]] = None, limit_s: float = 30) -> None:
        until = time.monotonic() + limit_s * SCALE
        names = names or self.names
        while time.monotonic() < until:
            if all(self.healthy(n) for n in names):
                return
            time.sleep(0.1)
        raise AssertionError(f"etcd members {names} not healthy in time:\n" + self.log_tails(names))

    def log_tails(self, names: List[str]) -> str:
        """Each member's last log lines and whether its process still runs: why it is not."""
        out = []
        for n in names:
            self.logs[n].flush()
            with open(os.path.join(self.work, f"{n}.log")) as f:
                tail = f.readlines()[-5:]
            state = "running" if self.procs[n].poll() is None else f"exited {self.procs[n].poll()}"
            out.append(f"{n} ({state}):\n" + "".join(tail))
        return "\n".join(out)
