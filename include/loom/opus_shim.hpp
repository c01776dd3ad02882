#pragma once
// The collective shim's side of Opus (§4.1-4.2, Alg. 1-2) on libloomclient: the layer under a
// training framework's collectives that asks Loom for the rail topology each one needs.
//
// A stage's shim writes a topo_write before every collective of its first (profiling) step and
// records what it ran; Loom learns the phase table from those traces (OpusJob.traces, answered
// with OpusRegistered). From then on it writes only where a parallelism phase starts (O1: the
// collectives after the first of a phase need nothing new), for every PP Send/Recv (PP is
// asymmetrical: both ends write each one), and whenever its topology does not serve the
// collective. In provisioning mode it writes for the next phase as soon as the previous
// phase's last collective completed (Alg. 2), so the switch turns while the stage computes;
// the next pre_comm only waits for that write's acknowledgement.
//
// A write the service did not take (it restarted under it, its store was read-only, it was
// stopping) is sent again after a pause, for as long as it takes, as the worker clients send
// their phase requests again: the next service's barrier counts it like the first.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "loom/client.hpp"

namespace loom {

enum class opus_shim_mode : uint8_t { on_demand, provisioning };

/// One collective of a stage's schedule: its communication group (the same name at every
/// writer, e.g. "dp0" or "pp0-1"), how many writers the group has, and the topo_id digit it
/// needs (0: PP Send/Recv; d >= 1: symmetrical dimension d, e.g. 1 = DP/FSDP).
struct opus_op {
  std::string group;
  uint32_t group_size = 1;
  uint32_t digit = 0;
};

/// Opus Alg. 1-2 for one stage, pure: which collectives write before they run, and after
/// which one the next is written at once. The shim below and replay's Opus steps both run it.
class opus_shim_policy {
public:
  explicit opus_shim_policy(opus_shim_mode mode) : mode_(mode) {}

  /// The stage's phase table: the digit each collective of one step needs, in order. Steps
  /// repeat, so a step's last phase runs into the next step's first. Empty: not profiled yet,
  /// and every collective writes.
  void set_table(std::vector<uint32_t> digits) { digits_ = std::move(digits); }
  bool profiled() const { return !digits_.empty(); }
  size_t ops_per_step() const { return digits_.size(); }
  opus_shim_mode mode() const { return mode_; }

  /// A parallelism phase starts at collective k of the step / ends with it.
  bool starts_phase(size_t k) const;
  bool ends_phase(size_t k) const;

  /// pre_comm (Alg. 1) for collective k; `served`: the stage's topology serves it now.
  bool write_before(size_t k, bool served) const;
  /// post_comm (Alg. 2): collective k completed; write for the next one now.
  bool write_after(size_t k) const;

private:
  opus_shim_mode mode_;
  std::vector<uint32_t> digits_;
};

/// The phase table of `stage` in Loom's answer to an OpusJob (each collective's digit, from
/// the learned phases); empty if the answer has none for it.
std::vector<uint32_t> phase_table(const v1::OpusRegistered& registered, uint32_t stage);

/// One pipeline stage's shim (one rank's, or one thread's standing for the stage's ranks) on a
/// client registered as collective-shim, after its job's OpusJob was answered. Calls come from
/// the stage's own thread, in its schedule's order: pre_comm before each collective,
/// post_comm after it, end_step after each training step.
class opus_stage_shim {
public:
  opus_stage_shim(client& c, std::string job, uint32_t stage, opus_shim_mode mode,
                  std::string topo);
  /// Waits for a provisioning write still unanswered.
  ~opus_stage_shim();
  opus_stage_shim(const opus_stage_shim&) = delete;
  opus_stage_shim& operator=(const opus_stage_shim&) = delete;

  /// Alg. 1: blocks until the rails serve the collective (writing for it if it must). False
  /// if a write failed (error() says why).
  bool pre_comm(const opus_op& op);
  /// Alg. 2: the collective completed.
  void post_comm();
  /// The training step ended (the first one is the profile).
  void end_step();
  /// The running step is the job's last: nothing is provisioned past its end.
  void last_step() { last_ = true; }

  /// What the stage ran in its first step: one collective's digit each (OpusStageTrace).
  v1::OpusStageTrace trace() const;
  /// The phase table Loom learned (phase_table()); false, and every collective keeps writing,
  /// if it does not match what this stage runs.
  bool set_table(std::vector<uint32_t> digits);

  int writes() const { return writes_; }
  const call_error& error() const { return error_; }
  /// The job's topo_id as the last acknowledgement said.
  std::string topo() const;

private:
  bool write(const opus_op& op, uint64_t index);
  /// Sends the write until the service takes it, then files its answer.
  bool write_until_taken(const opus_op& op, uint64_t index);
  void provision(const opus_op& op, uint64_t index);
  bool await_provisioned();
  void take_ack(const std::optional<v1::Envelope>& reply);
  bool served(const opus_op& op) const;

  client& client_;
  std::string job_;
  uint32_t stage_;
  opus_shim_policy policy_;
  std::vector<opus_op> schedule_; // the first step's collectives
  bool profiling_ = true;
  bool last_ = false;
  size_t k_ = 0;                            // collectives begun in this step
  std::map<std::string, uint64_t> counts_;  // per group: operation index of its next one
  int writes_ = 0;
  call_error error_;
  mutable std::mutex mutex_;
  std::condition_variable answered_;
  std::string topo_;
  bool fallback_ = false;
  bool failed_ = false;
  bool pending_ = false;                                     // a provisioning write is out
  std::optional<std::pair<std::string, uint64_t>> provisioned_; // what it wrote for
  std::optional<std::pair<opus_op, uint64_t>> resend_; // a provisioning write not taken
};

} // namespace loom
