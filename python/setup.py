# Installs offline with Debian's setuptools (no build isolation needed):
#   python3 -m venv --system-site-packages V && V/bin/pip install ./python
# The protocol module loom_pb2.py is generated from proto/loom.proto and kept current by the
# test `python_protocol` (`meson test python_protocol` says how to refresh it).
from setuptools import setup

setup(
    name="loom-client",
    version="0.1.0",
    description="Loom's worker client (loom.v1 over ZeroMQ) for RL frameworks",
    # loom_torch needs PyTorch, which comes from Debian (python3-torch), not from pip.
    packages=["loom_client", "loom_torch"],
    python_requires=">=3.9",
    install_requires=["pyzmq", "protobuf"],
    # The reference engine and its router (docs/engines.md).
    entry_points={"console_scripts": ["loom-engine-torch=loom_torch.engine:main",
                                      "loom-router-torch=loom_torch.router:main"]},
)
