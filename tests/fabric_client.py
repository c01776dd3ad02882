#!/usr/bin/python3
"""The fabric client calls (loom_client.fabric) through the two bundled examples, each against
a real `loom serve` on loopback: python/examples/rfabric_stages.py on the embedded defaults'
RFabric PoD, python/examples/mfabric_moe.py on conf/mfabric-region.toml. Every intent is
answered with a reason, plans are committed to the emulated switches, and `loom fabric` shows
each owner's plan afterwards; a malformed intent is refused before it leaves the client.

   fabric_client.py LOOM_BINARY SOURCE_ROOT"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

LOOM, ROOT = sys.argv.pop(1), sys.argv.pop(1)
sys.path.insert(0, os.path.join(ROOT, "python"))

from loom_client.fabric import Fabric, Rank  # noqa: E402

SCALE = float(os.environ.get("LOOM_TEST_TIME_SCALE", "1"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Serve:
    """`loom serve` on a copy of a bundled config: its own port and store, insecure."""

    def __init__(self, config, work):
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        with open(os.path.join(ROOT, config)) as f:
            text = f.read()
        text = re.sub(r'(?m)^gateway = "[^"]*"', f'gateway = "{self.endpoint}"', text)
        text = re.sub(r'(?m)^metrics = "[^"]*"', 'metrics = "127.0.0.1:0"', text)
        text = re.sub(r'(?m)^path = "[^"]*"', f'path = "{work}/db"', text)
        if re.search(r"(?m)^insecure = ", text):
            text = re.sub(r"(?m)^insecure = \w+", "insecure = true", text)
        else:
            text += "\n[security]\ninsecure = true\n"
        self.config = os.path.join(work, "loom.toml")
        with open(self.config, "w") as f:
            f.write(text)
        self.log = open(os.path.join(work, "serve.log"), "w")
        self.proc = subprocess.Popen([LOOM, "serve", "-c", self.config], stdout=self.log,
                                     stderr=subprocess.STDOUT, cwd=work)
        until = time.monotonic() + 60 * SCALE
        while "event=serve_ready" not in open(self.log.name).read():
            if time.monotonic() > until or self.proc.poll() is not None:
                raise AssertionError("serve never became ready:\n" + open(self.log.name).read())
            time.sleep(0.05)

    def example(self, name, owner):
        script = os.path.join(ROOT, "python", "examples", name)
        out = subprocess.run([sys.executable, script, "--endpoint", self.endpoint, "--owner",
                              owner], capture_output=True, text=True, timeout=120 * SCALE)
        return out.returncode, [json.loads(line) for line in out.stdout.splitlines()], out.stderr

    def fabric(self):
        out = subprocess.run([LOOM, "fabric", "-c", self.config], capture_output=True,
                             text=True, timeout=60 * SCALE)
        return out.stdout + out.stderr

    def stop(self):
        self.proc.terminate()
        self.proc.wait(60 * SCALE)
        self.log.close()


class FabricClientTest(unittest.TestCase):
    def run_example(self, config, name, owner):
        with tempfile.TemporaryDirectory() as work:
            serve = Serve(config, work)
            try:
                rc, decisions, err = serve.example(name, owner)
                self.assertEqual(rc, 0, err)
                listed = serve.fabric()
            finally:
                serve.stop()
        print(name, json.dumps(decisions))
        self.assertTrue(decisions, err)
        for d in decisions:
            self.assertIn(d["outcome"], ("committed", "unchanged", "deferred", "kept"), d)
            self.assertTrue(d["reason"], d)
        self.assertIn("committed", [d["outcome"] for d in decisions], decisions)
        self.assertIn(owner, listed)
        return decisions

    def test_rfabric_stages_commit_plans_through_the_client(self):
        """An intent deferred mid-step is committed at the window the shim reports alone;
        then each stage is announced at its own window."""
        decisions = self.run_example("conf/loom.toml", "rfabric_stages.py", "rl-job")
        self.assertEqual([(d["call"], d["stage"]) for d in decisions],
                         [("intent", "gen"), ("window", "gen")]
                         + [("intent", s) for s in ("gen", "weight-sync", "grad-sync")] * 2)
        self.assertEqual(decisions[0]["outcome"], "deferred", decisions[0])
        self.assertEqual(decisions[1]["outcome"], "committed", decisions[1])
        self.assertEqual(decisions[2]["outcome"], "unchanged", decisions[2])

    def test_mfabric_predicted_all_to_alls_commit_plans_through_the_client(self):
        decisions = self.run_example("conf/mfabric-region.toml", "mfabric_moe.py", "moe")
        self.assertEqual([d["layer"] for d in decisions], [0, 1, 2])

    def test_a_malformed_intent_fails_in_the_client(self):
        fabric = Fabric(client=None, owner="x")
        with self.assertRaises(ValueError):
            fabric.intent("decode", "all-to-all", [Rank(0, 0)], 1.0, "stage-boundary")
        with self.assertRaises(ValueError):
            fabric.intent("gen", "all-to-all", [Rank(0, 0)], 1.0, "whenever")


if __name__ == "__main__":
    unittest.main(verbosity=2)
