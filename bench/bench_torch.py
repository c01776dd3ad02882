#!/usr/bin/env python3
"""The reference engine (python/loom_torch) against its floors, side by side, as ratios:
  decode step   Batcher.step (scheduling, memory accounting, a forward) vs the bare batched
                forward of the same model on the same caches;
  KV transfer   a cache pulled over the engine's channel (Parking/pull: pack, send, unpack)
                vs the same bytes over a bare ZeroMQ REQ/REP on loopback;
  reshard       a TP1 instance closed and a TP2 one built (a worker process spawned, the
                group formed, weights re-made and re-split) vs making and splitting the same
                weights in this process: the process-group cost a reshard pays;
  weight sync   a version of a model's weights pulled from a worker's weight channel
                (loom_client.weights: publish, fetch, unpack into tensors, as a GRPO rollout
                worker does, WEAVE §5.2) vs the same bytes over a bare TCP socket on loopback;
  profile bound a GRPO job's profiling rollout (WEAVE §5 (1): every response at the task's
                maximum length) vs the identical rollout timed again: how far one measurement
                is from the worst case of the same work on this machine.
   bench_torch.py [PYTHON_DIR] [--rounds N]"""

import argparse

import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
import zmq  # noqa: E402

from loom_torch import KvCache, ModelConfig, init_weights, shard  # noqa: E402
from loom_torch.batching import Batcher, Request  # noqa: E402
from loom_torch.instance import Instance  # noqa: E402
from loom_torch.generate import pack  # noqa: E402
from loom_torch.kv_channel import DataServer, Parking, pull  # noqa: E402
from loom_torch.model import pack_weights, unpack_weights  # noqa: E402
from loom_torch.tokenizer import encode  # noqa: E402
from loom_client.weights import WeightChannel, fetch  # noqa: E402
from loom_torch.learner import Learner, model_config, rollout_share  # noqa: E402
from loom_torch.rollout import RolloutPolicy  # noqa: E402

CFG = ModelConfig(layers=4, hidden=256, heads=8, kv_heads=4, ffn=512)
SYNCED = ModelConfig(layers=8, hidden=512, heads=8, kv_heads=4, ffn=1536)  # ~100 MB
BATCH, CONTEXT, STEPS = 16, 256, 16


def median_of(fn, rounds):
    return statistics.median(fn() for _ in range(rounds))


def decode_step(instance, rounds):
    decoder = instance.decoder

    def engine():
        b = Batcher(instance, BATCH, 1 << 30)
        for i in range(BATCH):
            b.add(Request(i, encode("x" * CONTEXT), 1 << 20))
        b.step()  # prefill
        start = time.perf_counter()
        for _ in range(STEPS):
            b.step()
        elapsed = (time.perf_counter() - start) / STEPS
        instance.drop(list(range(BATCH)))
        return elapsed

    def bare():
        caches = [KvCache(CFG.layers) for _ in range(BATCH)]
        decoder.forward([encode("x" * CONTEXT)] * BATCH, caches)
        start = time.perf_counter()
        for _ in range(STEPS):
            decoder.forward([[65]] * BATCH, caches)
        return (time.perf_counter() - start) / STEPS
    return median_of(engine, rounds), median_of(bare, rounds)


def kv_transfer(decoder, rounds):
    cache = KvCache(CFG.layers)
    decoder.forward([encode("y" * 2048)], [cache])
    server, parking = DataServer(), Parking()
    parking.serve_on(server)
    nbytes = pack(cache)[1].nbytes

    def channel():
        start = time.perf_counter()
        parking.park(1, {}, cache)
        pull(server.address, 1)
        return time.perf_counter() - start

    ctx = zmq.Context.instance()
    rep, req = ctx.socket(zmq.REP), ctx.socket(zmq.REQ)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    req.connect(f"tcp://127.0.0.1:{port}")
    payload = b"\0" * nbytes

    def floor():
        start = time.perf_counter()
        req.send(b"1")
        rep.recv()
        rep.send(payload)
        req.recv()
        return time.perf_counter() - start
    result = median_of(channel, rounds), median_of(floor, rounds), nbytes
    server.close()
    rep.close()
    req.close()
    return result


def reshard(rounds):
    weight_bytes = sum(t.numel() * t.element_size() for t in init_weights(CFG, 1).values())

    def engine():
        tp1 = Instance(CFG, 1)
        start = time.perf_counter()
        tp1.close()
        tp2 = Instance(CFG, 1, tp=2)
        elapsed = time.perf_counter() - start
        tp2.close()
        return elapsed

    def floor():
        start = time.perf_counter()
        full = init_weights(CFG, 1)
        for rank in range(2):
            shard(full, rank, 2)
        return time.perf_counter() - start
    return median_of(engine, rounds), median_of(floor, rounds), weight_bytes


def weight_sync(rounds):
    """Per round, one new version published and pulled whole; the floor sends as many bytes
    down a connected loopback TCP socket into a preallocated buffer. Then a sync over two
    rollout nodes as WEAVE §5.2 routes it (trainer -> node A's worker -> node B's), whose
    time model_sync_s predicts as one copy over the cross-cluster link plus one broadcast
    hop: at the floor's measured speed on both links, twice the floor's time."""
    weights = init_weights(SYNCED, 1)
    server, relay = DataServer(), DataServer()
    channel, relayed = WeightChannel(server), WeightChannel(relay)
    version = [0]

    def loom():
        version[0] += 1
        start = time.perf_counter()
        channel.publish(version[0], *pack_weights(weights))
        unpack_weights(*fetch(server.address, version[0]))
        return time.perf_counter() - start

    def route():
        version[0] += 1
        start = time.perf_counter()
        channel.publish(version[0], *pack_weights(weights))
        got = fetch(server.address, version[0])  # node A's worker
        relayed.publish(version[0], *got)
        unpack_weights(*got)
        unpack_weights(*fetch(relay.address, version[0]))  # node B's, from A
        return time.perf_counter() - start

    nbytes = sum(t.numel() * t.element_size() for t in weights.values())
    payload, into = b"\0" * nbytes, bytearray(nbytes)
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()

    def floor():
        start = time.perf_counter()
        t = threading.Thread(target=sender.sendall, args=(payload,))
        t.start()
        view, got = memoryview(into), 0
        while got < nbytes:
            got += receiver.recv_into(view[got:])
        t.join()
        return time.perf_counter() - start
    result = median_of(loom, rounds), median_of(floor, rounds), nbytes, median_of(route, rounds)
    server.close()
    relay.close()
    for sock in (sender, receiver, listener):
        sock.close()
    return result


def profile_bound(repeats):
    """The profiling pass's rollout, then the same batch, weights and seeds `repeats` times."""
    a = argparse.Namespace(task="reverse", digits=1, seed=11, prompts=16, group=16, lr=1e-3,
                           minibatches=2, layers=2, hidden=64, checkpoint=None, base_steps=60)
    learner = Learner(a)
    policy = RolloutPolicy(model_config(a), learner.trainer.state(), 0)

    def rollout():
        start = time.perf_counter()
        rollout_share(a, policy, 1, 0, 1, to_max=True)
        return time.perf_counter() - start
    profiled = rollout()
    return profiled, [rollout() for _ in range(repeats)]


def main():
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
    torch.set_num_threads(1)
    instance = Instance(CFG, 1)
    decoder = instance.decoder
    engine, bare = decode_step(instance, rounds)
    print(f"decode step, batch {BATCH}, context {CONTEXT}: engine {engine * 1e3:.2f} ms, "
          f"bare forward {bare * 1e3:.2f} ms, ratio {engine / bare:.2f}")
    channel, floor, nbytes = kv_transfer(decoder, rounds)
    print(f"KV transfer, {nbytes / 1e6:.1f} MB: channel {nbytes / channel / 1e6:.0f} MB/s, "
          f"loopback REQ/REP {nbytes / floor / 1e6:.0f} MB/s, ratio {floor / channel:.2f}")
    took, floor, weight_bytes = reshard(rounds)
    print(f"reshard TP1 -> TP2, {weight_bytes / 1e6:.1f} MB of weights: {took * 1e3:.0f} ms "
          f"({weight_bytes / took / 1e6:.0f} MB/s), making and splitting them in-process "
          f"{floor * 1e3:.0f} ms, ratio {took / floor:.1f}")
    took, floor, nbytes, route = weight_sync(rounds)
    print(f"weight sync, {nbytes / 1e6:.1f} MB: weight channel {nbytes / took / 1e6:.0f} MB/s, "
          f"loopback TCP socket {nbytes / floor / 1e6:.0f} MB/s, ratio {took / floor:.2f}")
    print(f"sync over two rollout nodes (trainer -> A -> B): {route * 1e3:.0f} ms, "
          f"model_sync_s at the socket's speed {2 * floor * 1e3:.0f} ms, "
          f"measured/modelled {route / (2 * floor):.2f}")
    profiled, again = profile_bound(max(20, rounds))
    print(f"profiling rollout {profiled * 1e3:.0f} ms; the identical rollout {len(again)} times: "
          f"median {statistics.median(again) * 1e3:.0f} ms, max {max(again) * 1e3:.0f} ms, "
          f"max/median {max(again) / statistics.median(again):.2f}, over the profile "
          f"{sum(t > profiled for t in again)}/{len(again)}")


if __name__ == "__main__":
    main()
