"""A GRPO job that learns, under Loom and without it: `python3 -m loom_torch.grpo` as real
processes, a real `loom serve`, real PyTorch compute. Learning is asserted on the job's own
reward; what Loom must not change (restarts, kills, phases) is asserted as identical records.

   test_grpo.py LOOM_BINARY PYTHON_PACKAGE_DIR"""

import contextlib
import os
import random
import signal
import sys
import tempfile
import time
import unittest
from typing import Dict, Iterator, List, Tuple

LOOM = sys.argv.pop(1) if len(sys.argv) > 2 else os.environ.get("LOOM_BIN", "build/loom")
PACKAGE = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "python")

sys.path.insert(0, PACKAGE)

from grpo_process import Grpo, run  # noqa: E402
from loom_client import Job  # noqa: E402
from loom_service import SANITIZED, Service, nodes  # noqa: E402

Grpo.package = PACKAGE

# A profiled job's phases take tenths of a second here, so WEAVE §5.3's stuck deadline (10x
# its worst case, at least 10 s) would fail a job whose phase merely waited on a loaded
# machine: the likely cause of a fresh-clone run's trainer ending with JobEnded. The failure
# detector is not what these tests test.
STUCK = "[policy.weave]\nstuck_factor = 1000\n"

# Two PoDs of two rollout nodes each under an OCS-Agg of their own, the trainer's node in
# neither (RFabric §5.1's layout, as conf/loom.toml's one PoD).
TWO_PODS = "[fabric]\nkind = \"rfabric\"\nlink_gbps = 400\nnics_per_server = 1\n" + "".join(
    f"""[[fabric.pods]]
id = "p{p}"
servers = ["r{2 * p}", "r{2 * p + 1}"]
[[fabric.tors]]
id = "tor-p{p}"
pod = "p{p}"
rail = 0
ports = 8
[[fabric.ocs]]
id = "agg-p{p}"
tier = "agg"
pod = "p{p}"
ports = 8
[[fabric.links]]
from = "tor-p{p}:{{5..6}}"
to = "agg-p{p}:{{1..2}}"
""" for p in (0, 1))


def submit(service: Service, work: str, iterations: int, profile: bool) -> Dict[str, str]:
    """Submits the job `grpo-reverse`, with hand-written worst cases or (profile) to be
    profiled; the environment its workers need."""
    spec = os.path.join(work, "job.toml")
    worst = ("profile = true\n" if profile else "rollout_host_memory_gb = 10\n"
             "training_host_memory_gb = 10\nworst_rollout_s = 30\nworst_training_s = 30\n")
    with open(spec, "w") as f:
        f.write(f"""name = "grpo-reverse"
model = "loom-reference"
rollout_gpus = 4
training_gpus = 4
iterations = {iterations}
{worst}""")
    service.admin("submit", spec)
    return {"LOOM_ENDPOINT": service.endpoint, "LOOM_JOB": "grpo-reverse"}


@contextlib.contextmanager
def scheduled(iterations: int,
              profile: bool = False) -> Iterator[Tuple[Service, Dict[str, str]]]:
    """A fresh `serve` with the job submitted: the service and its workers' environment."""
    with tempfile.TemporaryDirectory() as work:
        service = Service(LOOM, work, STUCK)
        try:
            yield service, submit(service, work, iterations, profile)
        except AssertionError as e:
            raise AssertionError(f"{e}\nserve.log:\n{service.events()}{Grpo.said()}") from None
        finally:
            service.stop()


def counted(service: Service) -> List[str]:
    """The job's state and iterations as `loom jobs` shows them."""
    rows = [line.split() for line in service.admin("jobs").splitlines()
            if line.startswith("grpo-reverse ")]
    return rows[0][1:3]


def kill_serve_at(service: Service, job: Grpo, iterations: Tuple[int, ...],
                  pause: random.Random) -> None:
    """SIGKILLs `serve` once `job` reported each of `iterations`, a random moment later (in
    the middle of a phase or between two), and starts it again."""
    for k in iterations:
        job.until(k)
        time.sleep(pause.uniform(0, 0.2))
        service.kill()
        time.sleep(0.5)
        service.start()


def mean(xs: List[float]) -> float:
    return sum(xs) / len(xs)


class GrpoTest(unittest.TestCase):
    def tearDown(self):
        Grpo.kill_all()

    @unittest.skipIf(SANITIZED, "no C++ code runs: nothing for the sanitizers to watch")
    def test_the_policy_learns_the_task(self):
        """From the base model (right about one digit in ten) the mean reward and the
        exact-answer share rise past 0.6: GRPO's group advantages and clipped updates teach
        the reference model the task."""
        g = run("--task", "reverse", "--iterations", "40", "--seed", "1")
        its = g.iterations()
        self.assertEqual(sorted(its), list(range(1, 41)))
        first = mean([its[i]["reward"] for i in range(1, 6)])
        last = mean([its[i]["reward"] for i in range(31, 41)])
        self.assertLess(first, 0.2)
        self.assertGreater(last, 0.6, its)
        self.assertGreater(mean([its[i]["solved"] for i in range(31, 41)]), 0.6, its)
        self.assertTrue(all(r["weights_version"] == i for i, r in its.items()))

    @unittest.skipIf(SANITIZED, "no C++ code runs: nothing for the sanitizers to watch")
    def test_a_killed_job_resumes_from_its_last_iteration(self):
        """SIGKILLed mid-run and started again on its checkpoint folder, the job resumes after
        its last synced iteration and learns exactly what an uninterrupted run learns."""
        whole = run("--iterations", "14", "--seed", "4").iterations()
        with tempfile.TemporaryDirectory() as folder:
            first = Grpo("--iterations", "14", "--seed", "4", "--checkpoint", folder)
            first.until(6)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(60)
            second = run("--iterations", "14", "--seed", "4", "--checkpoint", folder)
        resumed = [r for r in second.records if r.get("event") == "resumed"]
        self.assertEqual(len(resumed), 1, second.records)
        self.assertGreaterEqual(resumed[0]["iteration"], 6)
        got = second.iterations()
        self.assertEqual(sorted(got), list(range(resumed[0]["iteration"] + 1, 15)))
        for i, r in got.items():
            self.assertEqual(r, whole[i], f"iteration {i}")

    def test_under_loom_through_serve_restarts_it_learns_what_it_learns_alone(self):
        """Scheduled by a real `serve` (every phase a run permit), with `serve` SIGKILLed and
        restarted three times mid-run, the job runs every iteration, Loom counts them, and each
        iteration learns exactly what the unscheduled run learns."""
        iterations = 16
        alone = run("--iterations", str(iterations), "--seed", "2").iterations()
        with scheduled(iterations) as (service, env):
            job = Grpo("--iterations", str(iterations), "--seed", "2", env=env)
            kill_serve_at(service, job, (4, 8, 12), random.Random(5))
            self.assertEqual(job.finish(), 0, job.stderr)
            self.assertEqual(job.iterations(), alone,
                             [r for r in job.records if "event" in r])
            self.assertTrue(all(r["rollout_gpus"] == 4 for r in job.records
                                if "reward" in r), job.records)
            self.assertEqual(counted(service), ["finished", f"{iterations}/{iterations}"])

    def test_split_over_processes_weights_move_along_loom_s_route(self):
        """A trainer and two rollout workers on two nodes under a real `serve`, submitted to
        be profiled: after the profiling pass (which keeps nothing), each sync's weights
        cross once to the first node's worker and go on from it to the second (WEAVE §5.2,
        the route in Loom's sync grant), every sync ends only when both hold them, and the
        split job learns exactly what one driver process learns."""
        iterations = 6
        alone = run("--iterations", str(iterations), "--seed", "6").iterations()
        with scheduled(iterations, profile=True) as (service, env):
            common = ["--iterations", str(iterations), "--seed", "6"]
            trainer = Grpo(*common, "--role", "train", "--node", "t0", env=env)
            rollouts = [Grpo(*common, "--role", "rollout", "--rank", str(r), "--workers",
                             "2", "--node", f"r{r}", env=env) for r in (0, 1)]
            self.assertEqual(trainer.finish(), 0, trainer.stderr)
            for r in rollouts:
                self.assertEqual(r.finish(), 0, r.stderr)
            self.assertEqual(trainer.iterations(), alone)
            self.assertEqual(len([r for r in trainer.records if r.get("event") == "profiled"]),
                             1, trainer.records)
            for rec in (r for r in trainer.records if "reward" in r):
                route = dict(rec["sync_route"])
                self.assertEqual(sorted(route), ["grpo-reverse-rollout-0",
                                                 "grpo-reverse-rollout-1"])
                self.assertNotEqual(route["grpo-reverse-rollout-0"],
                                    route["grpo-reverse-rollout-1"])
                self.assertEqual(rec["sync_missing"], [])
                self.assertGreater(rec["sync_bytes"], 100_000)
            # the second node pulls from the first, which pulled from the trainer
            first = [r for r in rollouts[0].records if r.get("event") == "rollout"]
            second = [r for r in rollouts[1].records if r.get("event") == "rollout"]
            self.assertEqual(len(first), iterations)
            self.assertEqual(len(second), iterations, second)
            # (a first grant may predate the other worker's registration: the last is settled)
            self.assertEqual(second[-1]["source"], first[-1]["address"])
            self.assertEqual(route["grpo-reverse-rollout-1"], first[0]["address"])
            self.assertEqual(route["grpo-reverse-rollout-0"], first[0]["source"])
            self.assertEqual([r["weights_version"] for r in second],
                             list(range(iterations)))
            # Counted where they arrived: every version crossed the route's two hops once
            # each, the model's size per hop (version 0 before the first rollout included).
            model = trainer.iterations()[1]["sync_bytes"]
            for k in range(iterations):
                self.assertEqual(first[k]["pulled_bytes"] + second[k]["pulled_bytes"],
                                 model * len(route), f"version {k}")
            self.assertEqual(counted(service), ["finished", f"{iterations}/{iterations}"])

    def test_on_a_fabric_with_pods_the_route_is_app_e_s_forest(self):
        """With the fabric's PoDs in serve's config, a rollout grant's route is OrchestrRL
        App. E's forest (not §5.2's one tree): each PoD's first node pulls from the trainer,
        the PoD's other node from it. Registrations only: no weights move here."""
        with tempfile.TemporaryDirectory() as work:
            service = Service(LOOM, work, STUCK + TWO_PODS, nodes(4, 1))
            workers = []
            try:
                env = submit(service, work, 1, False)
                common = dict(job=env["LOOM_JOB"], endpoint=env["LOOM_ENDPOINT"])
                workers.append(Job(role="train", worker_id="trainer", node="t0",
                                   data_address="tcp://127.0.0.1:7000", **common))
                for r in range(4):
                    workers.append(Job(role="rollout", worker_id=f"rollout-{r}", node=f"r{r}",
                                       data_address=f"tcp://127.0.0.1:{7001 + r}", **common))
                with workers[1].phase("rollout") as phase:
                    route = {h.worker: h.source for h in phase.grant.sync_route}
                self.assertEqual(route, {"rollout-0": "tcp://127.0.0.1:7000",
                                         "rollout-1": "tcp://127.0.0.1:7001",
                                         "rollout-2": "tcp://127.0.0.1:7000",
                                         "rollout-3": "tcp://127.0.0.1:7003"})
            finally:
                for w in workers:
                    w.close()
                service.stop()

    def test_split_roles_through_serve_restarts_learn_what_the_driver_learns(self):
        """The split job under a `serve` SIGKILLed twice mid-run: whatever phase each worker
        was in, an iteration Loom did not count runs again from its rollout (the trainer
        drops its groups, the rollout workers generate them again), and the job learns
        exactly what one driver process learns while Loom counts every iteration."""
        iterations = 8
        alone = run("--iterations", str(iterations), "--seed", "7").iterations()
        with scheduled(iterations) as (service, env):
            common = ["--iterations", str(iterations), "--seed", "7"]
            trainer = Grpo(*common, "--role", "train", "--node", "t0", env=env)
            rollouts = [Grpo(*common, "--role", "rollout", "--rank", str(r), "--workers",
                             "2", "--node", f"r{r}", env=env) for r in (0, 1)]
            kill_serve_at(service, trainer, (3, 6), random.Random(8))
            self.assertEqual(trainer.finish(), 0, trainer.stderr)
            for r in rollouts:
                self.assertEqual(r.finish(), 0, r.stderr)
            self.assertEqual(trainer.iterations(), alone,
                             [r for r in trainer.records if "event" in r])
            self.assertEqual(counted(service), ["finished", f"{iterations}/{iterations}"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
