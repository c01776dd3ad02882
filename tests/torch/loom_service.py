"""`loom serve` as the torch suites start it: a fresh store, insecure on loopback, with what a
test adds to its config; real processes only."""

import json
import os
import signal
import socket
import subprocess
import time

SCALE = float(os.environ.get("LOOM_TEST_TIME_SCALE", "1"))
# An ASan/UBSan build's suite (tests/meson.build): a case that runs no C++ code (a GRPO job
# without `serve`) is the normal build's alone there, as the sanitizers have nothing to watch.
SANITIZED = os.environ.get("LOOM_TEST_SANITIZED") == "1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nodes(rollout: int, training: int) -> str:
    """A cluster's node tables: `rollout` H20 nodes r0.. and `training` H800 nodes t0..."""
    out = ""
    for pool, gpu, n in (("rollout", "H20", rollout), ("training", "H800", training)):
        for i in range(n):
            out += (f'[[cluster.{pool}]]\nid = "{pool[0]}{i}"\ngpu = "{gpu}"\ngpus = 8\n'
                    f"host_memory_gb = 1024\n")
    return out


class Service:
    """`loom serve` of binary `loom` on a fresh store in `work`, with `extra` config and the
    cluster's node tables `cluster` (one rollout and one training node by default)."""

    def __init__(self, loom: str, work: str, extra: str, cluster: str = ""):
        self.loom = loom
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.config = os.path.join(work, "loom.toml")
        self.write_config(self.config, os.path.join(work, "db"), self.endpoint, extra, cluster)
        self.log = open(os.path.join(work, "serve.log"), "a")
        self.proc = None
        self.starts = 0
        self.start()

    @staticmethod
    def write_config(path: str, store: str, endpoint: str, extra: str, cluster: str = "") -> None:
        """serve's config: insecure on loopback, the store at `store`, `extra` appended."""
        with open(path, "w") as f:
            f.write(f"""[service]
name = "torch-live"
[endpoints]
gateway = "{endpoint}"
metrics = "127.0.0.1:0"
[storage]
path = "{store}"
[cluster]
name = "c"
cross_link_gbps = 20.0
{cluster or nodes(1, 1)}[security]
insecure = true
# A Python worker on 2 cores under a load near 20 was seen silent for 7.7 s, past 3 beats:
# declared dead, its job failed. These suites test the work, not the failure detector.
heartbeat_misses = 10
{extra}""")

    def start(self) -> None:
        self.proc = subprocess.Popen([self.loom, "serve", "-c", self.config], stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.starts += 1
        until = time.monotonic() + 60 * SCALE
        while time.monotonic() < until and self.proc.poll() is None:
            with open(self.log.name) as f:
                if f.read().count("event=serve_ready") >= self.starts:
                    return
            time.sleep(0.05)
        with open(self.log.name) as f:
            raise AssertionError("serve never became ready:\n" + f.read()[-3000:])

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
        self.log.close()

    def events(self, last: int = 40) -> str:
        """serve's last `last` event and warning lines: what a failing test prints, since its
        work folder (and the whole log) goes with it."""
        with open(self.log.name) as f:
            lines = [l for l in f if "event=" in l or "level=warning" in l or "level=error" in l]
        return "".join(lines[-last:])

    def admin(self, *args: str) -> str:
        out = subprocess.run([self.loom, *args, "-c", self.config], capture_output=True, text=True,
                             timeout=60 * SCALE)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def generation(self) -> dict:
        return json.loads(self.admin("generation", "--json"))[0]
