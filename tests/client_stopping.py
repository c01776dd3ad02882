#!/usr/bin/python3
"""The Python client, against a ROUTER socket playing a service that stops under a release: the
release's STOPPING answer (which may cross the ServiceStopping notice) sends the client to the
next service with the release, instead of failing the worker (test_gateway checks the C++
client the same way).
   client_stopping.py PYTHON_PACKAGE_DIR"""
import os
import sys
import threading
import time
import traceback

import zmq

sys.path.insert(0, sys.argv[1])
from loom_client import client as lc  # noqa: E402
from loom_client import loom_pb2 as pb  # noqa: E402


def main():
    ctx = zmq.Context.instance()
    service = ctx.socket(zmq.ROUTER)
    service.setsockopt(zmq.RCVTIMEO, 10000)
    service.bind("tcp://127.0.0.1:*")
    peer = [b""]

    def next_envelope():  # the next one that is not a heartbeat, within 10 s
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ident, body = service.recv_multipart()
            peer[0] = ident
            env = pb.Envelope()
            env.ParseFromString(body)
            if env.WhichOneof("body") != "heartbeat":
                return env
        raise AssertionError("the client sent nothing but heartbeats for 10 s")

    def answer(env, request_id):
        env.version = 1
        env.request_id = request_id
        service.send_multipart([peer[0], env.SerializeToString()])

    registered = pb.Envelope()
    registered.registered.heartbeat_ms = 1000
    c = lc.Client(service.getsockopt(zmq.LAST_ENDPOINT).decode(), timeout_s=10.0)
    results = {}

    def run(name, f):
        try:
            results[name] = f()
        except lc.LoomError as e:
            results[name] = e

    t = threading.Thread(target=run, args=("register", lambda: c.register("driver", "w", "j")))
    t.start()
    first = next_envelope()
    assert first.WhichOneof("body") == "register", first
    answer(registered, first.request_id)
    t.join()
    assert not isinstance(results["register"], Exception), results["register"]
    t = threading.Thread(target=run, args=("release", lambda: c.release("j", "rollout", 2.5)))
    t.start()
    release = next_envelope()
    assert release.WhichOneof("body") == "phase_release", release
    stopping = pb.Envelope()
    stopping.error.code = pb.ERROR_STOPPING
    stopping.error.message = "the service is stopping"
    answer(stopping, release.request_id)
    again = next_envelope()
    assert again.WhichOneof("body") == "register", again
    answer(registered, again.request_id)
    resent = next_envelope()
    assert resent.WhichOneof("body") == "phase_release", resent
    assert resent.phase_release.job == "j" and resent.phase_release.solo_s == 2.5, resent
    ok = pb.Envelope()
    ok.ok.SetInParent()
    answer(ok, resent.request_id)
    t.join(10)
    assert not t.is_alive(), "the release never returned"
    assert not isinstance(results["release"], Exception), results["release"]
    print("a release answered STOPPING went again to the next service")
    c.close()
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:  # noqa: BLE001 - any failure fails the test, at once
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    os._exit(status)  # not waiting on the client's sockets at interpreter exit
