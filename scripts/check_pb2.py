#!/usr/bin/env python3
"""Fails when the Python package's shipped loom_pb2.py is not what protoc makes of
proto/loom.proto now (the build's copy), and says how to refresh it."""
import sys

built, shipped = sys.argv[1], sys.argv[2]
if open(built, "rb").read() != open(shipped, "rb").read():
    print(f"{shipped} is out of date with proto/loom.proto; refresh it:\n  cp {built} {shipped}")
    sys.exit(1)
