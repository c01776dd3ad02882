"""The reference engine's decoder computes what a transformer computes: cached decoding equals
recomputing from scratch, batching changes nothing, a moved or recomputed KV cache continues a
request exactly, and a TP2 instance of two processes (gloo) decodes as TP1 does."""

import json
import os
import random
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1) if len(sys.argv) > 1 else
                os.path.join(os.path.dirname(__file__), "..", "..", "python"))

import torch  # noqa: E402

from loom_torch import Decoder, KvCache, ModelConfig, init_weights, shard  # noqa: E402
from loom_torch.batching import Batcher, Request  # noqa: E402
from loom_torch.instance import Instance, Mirrors  # noqa: E402
from loom_torch.parallel import free_address, rank_shares  # noqa: E402
from loom_torch.generate import greedy, pack, sample, unpack  # noqa: E402
from loom_torch.grpo_split import Inbox, call  # noqa: E402
from loom_torch.kv_channel import DataServer, Parking, pull  # noqa: E402
from loom_torch.base_model import base_weights  # noqa: E402
from loom_torch.learner import response_tokens  # noqa: E402
from loom_torch.rollout import RolloutPolicy  # noqa: E402
from loom_torch.tasks import Problem, longest_response, problems, reward  # noqa: E402
from loom_torch.tokenizer import EOS, decode, encode  # noqa: E402
from loom_torch.trainer import Trainer, group_advantages  # noqa: E402

CFG = ModelConfig(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128)
PROMPTS = [encode("12+34="), encode("reverse: 98765"), encode("a")]


def uncached_greedy(decoder, prompt, max_new):
    """The reference: every step a fresh forward over the whole sequence."""
    seq, out = list(prompt), []
    for _ in range(max_new):
        t = int(decoder.forward([seq], [KvCache(decoder.cfg.layers)]).argmax(-1))
        out.append(t)
        seq.append(t)
    return out


class DecoderTest(unittest.TestCase):
    def setUp(self):
        torch.set_num_threads(1)
        self.weights = init_weights(CFG, seed=7)
        self.decoder = Decoder(CFG, self.weights)

    def test_cached_decoding_equals_recomputing_every_step(self):
        for p in PROMPTS:
            self.assertEqual(greedy(self.decoder, [p], 12)[0], uncached_greedy(self.decoder, p, 12))

    def test_a_batch_decodes_each_request_as_alone(self):
        batched = greedy(self.decoder, PROMPTS, 12)
        for p, out in zip(PROMPTS, batched):
            self.assertEqual(out, greedy(self.decoder, [p], 12)[0])
        self.assertEqual(len({tuple(o) for o in batched}), len(PROMPTS))  # not one constant

    def test_a_moved_cache_and_a_recomputed_one_continue_the_request_exactly(self):
        prompt, whole = PROMPTS[1], greedy(self.decoder, [PROMPTS[1]], 16)[0]
        cache = KvCache(CFG.layers)
        feed, got = list(prompt), []
        for _ in range(6):  # six tokens here, then the request moves
            t = int(self.decoder.forward([feed], [cache]).argmax(-1))
            got.append(t)
            feed = [t]
        header, body = pack(cache)
        self.assertEqual(body.nbytes, cache.tokens * CFG.kv_bytes_per_token())
        elsewhere = Decoder(CFG, self.weights)  # another instance of the same model
        for moved, first in ((unpack(header, body), feed),                 # KV transfer
                             (KvCache(CFG.layers), prompt + got)):  # recompute from tokens
            out, step = list(got), first
            while len(out) < 16:
                t = int(elsewhere.forward([step], [moved]).argmax(-1))
                out.append(t)
                step = [t]
            self.assertEqual(out, whole)

    def test_shards_are_slices_of_the_full_weights(self):
        halves = [shard(self.weights, r, 2) for r in range(2)]
        q = "layers.0.q_proj"
        self.assertTrue(torch.equal(torch.cat([h[q] for h in halves]), self.weights[q]))
        o = "layers.1.o_proj"
        self.assertTrue(torch.equal(torch.cat([h[o] for h in halves], dim=1), self.weights[o]))
        # TP4 of 2 KV heads: each KV head on the two ranks whose query heads read it.
        k = "layers.0.k_proj"
        quarters = [shard(self.weights, r, 4, CFG.kv_heads)[k] for r in range(4)]
        self.assertTrue(torch.equal(quarters[0], quarters[1]))
        self.assertTrue(torch.equal(torch.cat([quarters[1], quarters[2]]), self.weights[k]))
        self.assertEqual(CFG.kv_bytes_per_token(4), CFG.kv_bytes_per_token(2))
        with self.assertRaisesRegex(ValueError, "heads 4 does not split over TP3"):
            Decoder(CFG, self.weights, 0, 3)

    def test_bytes_round_trip(self):
        self.assertEqual(decode(encode("héllo")), "héllo")


def _source_engine(prompt, steps, out, done):
    """Another process: decodes `steps` tokens, then parks the cache as a migration does."""
    torch.set_num_threads(1)
    decoder = Decoder(CFG, init_weights(CFG, seed=7))
    cache, feed, got = KvCache(CFG.layers), list(prompt), []
    for _ in range(steps):
        t = int(decoder.forward([feed], [cache]).argmax(-1))
        got.append(t)
        feed = [t]
    server, parking = DataServer(), Parking()
    parking.serve_on(server)
    sent = parking.park(42, {"output": got}, cache)
    out.put((server.address, got, sent))
    done.wait(60)
    server.close()


class KvChannelTest(unittest.TestCase):
    def test_a_cache_pulled_from_another_process_continues_the_request_exactly(self):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        out, done = ctx.Queue(), ctx.Event()
        source = ctx.Process(target=_source_engine, args=(PROMPTS[0], 5, out, done))
        source.start()
        try:
            address, got, sent = out.get(timeout=120)
            pulled = pull(address, 42)
            self.assertIsNotNone(pulled)
            state, cache = pulled
            self.assertEqual(state["output"], got)
            self.assertEqual(cache.tokens, len(PROMPTS[0]) + 4)  # the last token is fed next
            self.assertIsNone(pull(address, 42))  # pulled once: it left the source
            self.assertIsNone(pull(address, 7))   # never parked
        finally:
            done.set()
            source.join(60)
        decoder = Decoder(CFG, init_weights(CFG, seed=7))
        out_tokens, step = list(got), [got[-1]]
        while len(out_tokens) < 12:
            t = int(decoder.forward([step], [cache]).argmax(-1))
            out_tokens.append(t)
            step = [t]
        self.assertEqual(out_tokens, greedy(decoder, [PROMPTS[0]], 12)[0])
        self.assertGreater(sent, 0)


class BatchingTest(unittest.TestCase):
    """Continuous batching changes when tokens are computed, never which."""

    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.prompts = [encode(f"{i * 37}+{i * 11}=") for i in range(6)]
        decoder = Decoder(CFG, init_weights(CFG, seed=7))
        cls.alone = [greedy(decoder, [p], 10)[0] for p in cls.prompts]

    def run_all(self, batcher, requests=None):
        requests = requests or [Request(i, p, 10) for i, p in enumerate(self.prompts)]
        for r in requests:
            batcher.add(r)
        done, steps = {}, 0
        while len(done) < len(requests):
            for r in batcher.step():
                done[r.id] = r.output
            steps += 1
            self.assertLess(steps, 500)
            self.assertLessEqual(batcher.kv_used(), batcher.kv_capacity)
            self.assertLessEqual(len(batcher.running), batcher.max_batch)
        self.assertEqual(batcher.instance.caches, {})  # every finished request's memory freed
        return [done[r.id] for r in requests]

    def test_a_bounded_batch_gives_every_request_its_own_output(self):
        self.assertEqual(self.run_all(Batcher(Instance(CFG, 7), 3, 10_000)), self.alone)

    def test_memory_pressure_preempts_and_recomputes_without_changing_outputs(self):
        batcher = Batcher(Instance(CFG, 7), 6, 40)  # room for about two requests' caches
        self.assertEqual(self.run_all(batcher), self.alone)
        self.assertGreater(batcher.preemptions, 0)

    def test_a_request_released_midway_finishes_elsewhere_as_it_would_have(self):
        here, there = Batcher(Instance(CFG, 7), 4, 10_000), Batcher(Instance(CFG, 7), 4, 10_000)
        here.add(Request(0, self.prompts[0], 10))
        for _ in range(4):
            here.step()
        request, cache = here.release(0)
        self.assertIsNotNone(cache)
        self.assertEqual(here.instance.caches, {})
        there.add(request, cache)  # its cache travels with it
        out = []
        while not out:
            out = there.step()
        self.assertEqual(out[0].output, self.alone[0])

    def test_tp2_over_two_processes_decodes_as_tp1(self):
        batcher = Batcher(Instance(CFG, 7, tp=2), 6, 10_000)
        outputs = self.run_all(batcher)
        batcher.instance.close()
        same = sum(a == b for o, alone in zip(outputs, self.alone) for a, b in zip(o, alone))
        self.assertGreaterEqual(same / sum(map(len, self.alone)), 0.99, (outputs, self.alone))

    def test_tp4_spanning_two_engines_decodes_as_tp1(self):
        # A spanning instance as two engines build it: the lead hosts ranks 0-1 here, the
        # follower's ranks 2-3 join its rendezvous as Mirrors (the engine's _follow).
        shares = rank_shares(4, [("e0", 2), ("e1", 2)])
        self.assertEqual(shares, [("e0", range(0, 2)), ("e1", range(2, 4))])
        address = free_address()
        follower = Mirrors(CFG, 7, 4, address, shares[1][1])
        batcher = Batcher(Instance(CFG, 7, 4, "cpu", len(shares[0][1]), address), 6, 10_000)
        self.assertTrue(follower.joined(60))
        outputs = self.run_all(batcher)
        batcher.instance.close()
        follower.close(grace_s=30)
        self.assertFalse(any(p.is_alive() for p in follower.procs))  # the lead's stop ended them
        same = sum(a == b for o, alone in zip(outputs, self.alone) for a, b in zip(o, alone))
        self.assertGreaterEqual(same / sum(map(len, self.alone)), 0.99, (outputs, self.alone))

    def test_a_reshard_to_tp2_and_back_mid_generation_keeps_the_outputs(self):
        # Loom's Reconfigure: drain (the requests are released with what they generated), the
        # instance is rebuilt over the new degree (two processes, gloo), the requests are
        # admitted again and recompute their caches from their tokens.
        requests = [Request(i, p, 10) for i, p in enumerate(self.prompts)]
        batcher = Batcher(Instance(CFG, 7, tp=1), 6, 10_000)
        for tp in (2, 1):
            for r in requests:
                if not r.done:
                    batcher.add(r)
            for _ in range(3):
                batcher.step()
            held = [batcher.release(r.id) for r in requests if not r.done]
            self.assertTrue(all(h is not None for h in held))
            batcher.instance.close()
            batcher = Batcher(Instance(CFG, 7, tp=tp), 6, 10_000)
            self.assertEqual(batcher.instance.tp, tp)
        self.run_all(batcher, [r for r in requests if not r.done])
        same = sum(a == b for r in requests for a, b in zip(r.output, self.alone[r.id]))
        self.assertGreaterEqual(same / sum(map(len, self.alone)), 0.99)
        batcher.instance.close()


class GrpoPiecesTest(unittest.TestCase):
    """The parts of the GRPO job: its checker, its advantages, and a trainer whose
    log-probabilities are the engine's own (PPO's ratio starts at exactly 1)."""

    def test_the_reward_is_exact_and_graded(self):
        p = Problem("12>", "21")
        self.assertEqual(reward(p, p.target()), 1.0)
        self.assertLess(reward(p, encode("21", bos=False)), 1.0)  # never stopped
        self.assertLess(reward(p, p.target() + [EOS]), 1.0)  # ran on
        self.assertEqual(reward(p, encode("2", bos=False) + [0, EOS]), 1 / 3)
        self.assertEqual(reward(p, encode("2", bos=False)), 1 / 3)
        # A wrong answer earns nothing for where it stops: a policy paid for stopping after
        # any byte collapses onto one wrong answer.
        self.assertEqual(reward(p, encode("31", bos=False) + [EOS]), 0.0)
        self.assertEqual(reward(p, []), 0.0)

    def test_the_base_model_knows_the_answers_form_not_the_task(self):
        cfg = ModelConfig(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128)
        decoder = Decoder(cfg, base_weights(cfg, "reverse", 1, seed=3, steps=60))
        batch = problems("reverse", random.Random(5), 64, 1)
        out = sample(decoder, [p.prompt_tokens() for p in batch], 2,
                     torch.Generator().manual_seed(5))
        formed = [r for r in out if len(r) == 2 and decode(r[:1]).isdigit() and r[1] == EOS]
        right = [p for p, r in zip(batch, out) if reward(p, r) == 1.0]
        self.assertGreater(len(formed), 0.7 * len(out))  # a digit, then a stop
        self.assertLess(len(right), 0.3 * len(out))  # about one in ten is the right digit

    def test_a_profiling_rollout_is_as_long_as_the_task_allows_whatever_its_batch(self):
        # WEAVE §5 (1): the profile must bound every later rollout, so it is generated at the
        # task's longest answer ("99+99=" -> "198", then EOS), not at the drawn batch's.
        self.assertEqual(longest_response("add", 2), 4)
        self.assertEqual(longest_response("reverse", 3), 4)
        policy = RolloutPolicy(CFG, init_weights(CFG, seed=2))
        seed_of = lambda i: i  # noqa: E731
        short = [(0, Problem("1+2=", "3")), (1, Problem("4+0=", "4"))]
        profiled = policy.generate(short, 3, seed_of, longest_response("add", 2))
        self.assertEqual(response_tokens(profiled), 2 * 3 * 4)
        for draw in range(5):
            batch = list(enumerate(problems("add", random.Random(draw), 2, 2)))
            self.assertLessEqual(response_tokens(policy.generate(batch, 3, seed_of)),
                                 response_tokens(profiled))

    def test_advantages_are_normalised_within_the_group(self):
        adv = group_advantages([1.0, 0.0, 0.5, 0.5])
        self.assertAlmostEqual(sum(adv), 0.0, places=6)
        self.assertAlmostEqual(sum(a * a for a in adv) / len(adv), 1.0, places=4)
        self.assertGreater(adv[0], adv[2])
        self.assertEqual(group_advantages([0.3] * 5), [0.0] * 5)

    def test_the_trainer_scores_responses_as_the_decoder_generates_them(self):
        torch.set_num_threads(1)
        weights = init_weights(CFG, seed=5)
        trainer, decoder = Trainer(CFG, weights, lr=1e-3), Decoder(CFG, weights)
        prompts = [encode("3>"), encode("hello there")]
        outs = sample(decoder, prompts, 6, torch.Generator().manual_seed(1))
        self.assertEqual(outs, sample(decoder, prompts, 6, torch.Generator().manual_seed(1)))
        got = trainer.response_logprobs([(p, o, 0.0) for p, o in zip(prompts, outs)])
        for p, o, lp in zip(prompts, outs, got):
            seq, want = list(p), []
            for t in o:
                logits = decoder.forward([seq], [KvCache(CFG.layers)])[0]
                want.append(float(torch.log_softmax(logits, -1)[t]))
                seq.append(t)
            self.assertTrue(torch.allclose(lp.detach(), torch.tensor(want), atol=1e-4))
            self.assertTrue(lp.requires_grad)


class InboxTest(unittest.TestCase):
    """The split trainer's channel keeps an iteration's samples until it is trained."""

    def test_a_trained_iteration_is_forgotten_and_late_samples_are_not_kept(self):
        server = DataServer()
        self.addCleanup(server.close)
        inbox = Inbox(server, 2, lambda: {})

        def send(k, indices):
            groups = [{"index": i, "prompt": "1+1", "answer": "2", "responses": [],
                       "rewards": []} for i in indices]
            reply = call(server.address, b"samples", str(k).encode(), json.dumps(groups).encode())
            self.assertEqual(reply, b"ok")

        send(1, [0, 1])
        send(2, [0])
        self.assertEqual(call(server.address, b"complete", b"1"), b"yes")
        self.assertEqual(call(server.address, b"complete", b"2"), b"no")
        self.assertEqual(len(inbox.wait(1)), 2)
        inbox.trained(1)
        send(1, [0, 1])  # late: a worker that ran iteration 1 again
        self.assertEqual(sorted(inbox._groups), [2])
        self.assertEqual(call(server.address, b"complete", b"1"), b"yes")


if __name__ == "__main__":
    unittest.main(verbosity=2)
