#!/usr/bin/python3
"""The Python client says why a service is silent (#40 item 8): a CURVE service whose key is
not the one the client was given drops its handshake without a word, so the client's
TimeoutError names the stale server key; a service that answers names nothing; a port with
no listener says so.
   client_link_diagnosis.py PYTHON_PACKAGE_DIR"""
import os
import socket
import sys
import tempfile
import threading

import zmq

sys.path.insert(0, sys.argv[1])
from loom_client import client as lc  # noqa: E402
from loom_client import loom_pb2 as pb  # noqa: E402


def write_pair(directory, name):
    public, secret = zmq.curve_keypair()
    for suffix, key in ((".pub", public), (".secret", secret)):
        with open(os.path.join(directory, name + suffix), "w") as f:
            f.write(key.decode() + "\n")
    return os.path.join(directory, name)


def curve_service(ctx, directory):
    """A CURVE ROUTER that answers every request Ok (no ZAP: any client key is let in)."""
    sock = ctx.socket(zmq.ROUTER)
    prefix = write_pair(directory, "server")
    sock.curve_server = True
    sock.curve_secretkey = lc.read_key(prefix + ".secret").encode()
    port = sock.bind_to_random_port("tcp://127.0.0.1")

    def serve():
        while True:
            try:
                ident, body = sock.recv_multipart()
            except zmq.ContextTerminated:
                return
            request = pb.Envelope.FromString(body)
            reply = pb.Envelope(version=1, request_id=request.request_id)
            reply.ok.SetInParent()
            sock.send_multipart([ident, reply.SerializeToString()])

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{port}", prefix + ".pub"


def silence_of(endpoint, server_pub, key):
    c = lc.Client(endpoint, server_key=server_pub, key=key, timeout_s=1.5)
    try:
        c.call(pb.Envelope(list_jobs=pb.ListJobs()))
        return None
    except TimeoutError as e:
        return str(e)
    finally:
        c.close()


def main():
    ctx = zmq.Context.instance()
    with tempfile.TemporaryDirectory() as d:
        endpoint, server_pub = curve_service(ctx, d)
        key = write_pair(d, "worker")
        stale = write_pair(d, "stale") + ".pub"
        assert silence_of(endpoint, server_pub, key) is None, "the right key got no answer"
        why = silence_of(endpoint, stale, key)
        assert why and "the server key is not this service's" in why, why
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
        free.close()
        why = silence_of(f"tcp://127.0.0.1:{port}", server_pub, key)
        assert why and "nothing accepted a connection" in why, why
    print("ok")


if __name__ == "__main__":
    main()
