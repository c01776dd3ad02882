"""The collective shim's side of Opus (§4.1-4.2, Alg. 1-2), as include/loom/opus_shim.hpp.

A stage's shim writes a topo_write before every collective of its first (profiling) step and
records what it ran; Loom learns the phase table from those traces (OpusJob.traces, answered
with OpusRegistered). From then on it writes only where a parallelism phase starts (O1), for
every PP Send/Recv (both ends write each one), and whenever its topology does not serve the
collective; in provisioning mode it writes for the next phase as soon as the previous phase's
last collective completed (Alg. 2), and the next pre_comm only waits for that acknowledgement.

    shim = StageShim(client, "llama", stage=0, mode="provisioning", topo=registered.topo)
    shim.pre_comm(Op("dp0", 1, 1))   # blocks until the rails serve it
    all_gather(...)
    shim.post_comm()
    ...
    shim.end_step()
"""

import collections
import threading
import time

from . import loom_pb2 as pb
from .client import LoomError

# Answers that mean the service did not take a write; sent again, pausing 0.1 s up to 2 s.
_NOT_TAKEN = (pb.ERROR_RESTART_ITERATION, pb.ERROR_READ_ONLY, pb.ERROR_STOPPING)
_FIRST_PAUSE_S, _LONGEST_PAUSE_S = 0.1, 2.0

Op = collections.namedtuple("Op", "group group_size digit")
Op.__doc__ = ("A collective: its communication group (the same name at every writer), how many "
              "writers it has, and the topo_id digit it needs (0: PP, d >= 1: dimension d).")


class Policy:
    """Opus Alg. 1-2 for one stage: which collectives write before they run, and after which one
    the next is written at once. `digits`: the phase table, one digit per collective of a step
    (steps repeat); empty until profiled, when every collective writes."""

    def __init__(self, mode):
        if mode not in ("on-demand", "provisioning"):
            raise ValueError(f"mode must be on-demand or provisioning, not {mode!r}")
        self.mode = mode
        self.digits = []

    def starts_phase(self, k):
        return self.digits[k] != self.digits[k - 1]

    def ends_phase(self, k):
        return self.digits[k] != self.digits[(k + 1) % len(self.digits)]

    def write_before(self, k, served):
        if not self.digits:
            return True
        return (self.digits[k] == 0 or (self.mode == "on-demand" and self.starts_phase(k))
                or not served)

    def write_after(self, k):
        return (bool(self.digits) and self.mode == "provisioning"
                and (self.ends_phase(k) or self.digits[k] == 0))


def phase_table(registered, stage):
    """Each collective's digit for `stage` from Loom's OpusRegistered; [] if it has none."""
    digits = []
    for p in registered.phases:
        if p.stage == stage:
            digits.extend([0] * max(0, p.last + 1 - len(digits)))
            for k in range(p.first, p.last + 1):
                digits[k] = p.digit
    return digits


class StageShim:
    """One pipeline stage's shim on a Client registered as collective-shim. Calls come from the
    stage's own thread, in its schedule's order."""

    def __init__(self, client, job, stage, mode, topo):
        self.client, self.job, self.stage = client, job, stage
        self.policy = Policy(mode)
        self.topo, self.fallback = topo, False
        self.schedule = []          # the first step's collectives
        self.profiling, self.last = True, False
        self.k = 0
        self.counts = collections.Counter()
        self.writes = 0
        self._pending = None        # the provisioning write's thread
        self._provisioned = None    # (group, op_index) it wrote for
        self._error = None

    def _write_of(self, op, index):
        env = pb.Envelope()
        w = env.topo_write
        w.job, w.group, w.op_index = self.job, op.group, index
        w.group_size, w.stage, w.digit = op.group_size, self.stage, op.digit
        return env

    def _take(self, env):
        """Sends the write until the service takes it: one it did not take (it went away under
        it, its store is read-only, it is stopping) is sent again after a pause, as the worker
        clients send their phase requests again."""
        pause = _FIRST_PAUSE_S
        while True:
            try:
                ack = self.client.call(env, timeout_s=None).topo_ack
                self.topo, self.fallback = ack.topo, ack.fallback
                return
            except LoomError as e:
                if e.code not in _NOT_TAKEN:
                    self._error = e
                    return
            except Exception as e:  # noqa: BLE001 - re-raised on the stage's thread
                self._error = e
                return
            time.sleep(pause)
            pause = min(2 * pause, _LONGEST_PAUSE_S)

    def _await(self):
        if self._pending is not None:
            self._pending.join()
            self._pending = None
        if self._error is not None:
            raise self._error

    def _served(self, op):
        return self.fallback or (self.stage < len(self.topo)
                                 and int(self.topo[self.stage]) == op.digit)

    def pre_comm(self, op):
        """Alg. 1: blocks until the rails serve the collective, writing for it if it must."""
        self._await()
        index = self.counts[op.group]
        self.counts[op.group] += 1
        k = self.k
        self.k += 1
        if self.profiling:
            self.schedule.append(op)
        if self._provisioned == (op.group, index):
            self._provisioned = None
            return
        known = k < len(self.policy.digits)
        if known and not self.policy.write_before(k, self._served(op)):
            return
        self.writes += 1
        self._take(self._write_of(op, index))
        self._await()

    def post_comm(self):
        """Alg. 2: the collective completed; provisioning writes the next one now."""
        k = self.k - 1
        if k < 0 or k >= len(self.schedule) or not self.policy.write_after(k):
            return
        nxt = k + 1
        if nxt == len(self.schedule):
            if self.last:
                return
            nxt = 0
        op = self.schedule[nxt]
        self._provisioned = (op.group, self.counts[op.group])
        self.writes += 1
        self._pending = threading.Thread(
            target=self._take, args=(self._write_of(op, self.counts[op.group]),), daemon=True)
        self._pending.start()

    def end_step(self):
        self.k = 0
        self.profiling = False

    def trace(self):
        """What the stage ran in its first step, as an OpusStageTrace."""
        t = pb.OpusStageTrace()
        t.stage = self.stage
        t.digits.extend(op.digit for op in self.schedule)
        return t

    def set_table(self, digits):
        """The phase table Loom learned; False (every collective keeps writing) if it does not
        match what this stage runs."""
        if list(digits) != [op.digit for op in self.schedule]:
            return False
        self.policy.digits = list(digits)
        return True

    def close(self):
        """Waits for a provisioning write still unanswered."""
        self._await()
