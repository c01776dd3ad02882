"""Loom's Python client (loom.v1 over ZeroMQ) for RL-framework workers.

Needs only python3-zmq and python3-protobuf. Install it into a virtual environment that sees
Debian's packages (`python3 -m venv --system-site-packages V && V/bin/pip install ./python`),
or put `python/` on PYTHONPATH.

    from loom_client import Job, Restarted
    job = Job("math-7b", role="driver")     # LOOM_ENDPOINT unset: every call is a no-op
    with job.phase("rollout") as p:         # blocks until Loom grants the phase
        ...
    job.finish()

`Job` is the API a framework wraps (job.py); `Client` the raw calls (client.py).
"""

from .client import (Client, JobEnded, LoomError, PHASES, ROLES, Restarted, error_of,
                     read_key)
from .job import Grant, Hop, Job, Phase

__all__ = ["Client", "Grant", "Hop", "Job", "JobEnded", "LoomError", "PHASES", "Phase", "ROLES",
           "Restarted", "engine_arguments", "error_of", "read_key", "service_arguments",
           "worker_arguments"]


def service_arguments(description, prog=None):
    """An argparse parser with how any client reaches the service: its endpoint and keys."""
    import argparse

    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--endpoint", default="tcp://127.0.0.1:5555")
    p.add_argument("--server-key", help="the service's public key file (omit if insecure)")
    p.add_argument("--key", help="this client's key pair prefix (KEY.pub, KEY.secret)")
    return p


def engine_arguments(description, gpus, prog=None):
    """service_arguments plus what names an engine: its deployment, id, node and GPUs."""
    p = service_arguments(description, prog)
    p.add_argument("--deployment", required=True)
    p.add_argument("--engine-id", required=True)
    p.add_argument("--node", default="")
    p.add_argument("--gpus", type=int, default=gpus, help="devices: the TP ranks it can run")
    return p


def worker_arguments(description):
    """service_arguments plus what the example workers need: the job, the iterations to run and
    how long each phase works."""
    p = service_arguments(description)
    p.add_argument("--job", required=True)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--phase-ms", type=int, default=50)
    return p
