#pragma once
// The fabric's plain data (no CAF): what the runtime (workers through the gateway, replay's
// simulations) and the fabric controller tell each other. Intents with their commit windows
// go up and decisions come down (RFabric §5.3); Opus jobs, topo_writes and their ACKs
// (Opus §4.1).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"

namespace loom {

/// A GPU rank: a server (fabric_model index) and a GPU on it; its NIC is the rail it sits on.
struct rank_ref {
  uint32_t server = 0;
  int gpu = 0;
  friend auto operator<=>(const rank_ref&, const rank_ref&) = default;
};

/// The RL stage a communication period belongs to (RFabric §5.2).
enum class fabric_stage : uint8_t { train_compute, train_grad_sync, gen, weight_sync };

template <>
struct enum_names<fabric_stage> {
  static constexpr std::array<std::pair<fabric_stage, std::string_view>, 4> table{{
    {fabric_stage::train_compute, "train"},
    {fabric_stage::train_grad_sync, "grad-sync"},
    {fabric_stage::gen, "gen"},
    {fabric_stage::weight_sync, "weight-sync"},
  }};
};

enum class primitive : uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  all_to_all,
  broadcast,
  send_recv,
  m2n,
};

template <>
struct enum_names<primitive> {
  static constexpr std::array<std::pair<primitive, std::string_view>, 7> table{{
    {primitive::all_reduce, "all-reduce"},
    {primitive::all_gather, "all-gather"},
    {primitive::reduce_scatter, "reduce-scatter"},
    {primitive::all_to_all, "all-to-all"},
    {primitive::broadcast, "broadcast"},
    {primitive::send_recv, "send-recv"},
    {primitive::m2n, "m2n"},
  }};
};

struct primitive_share {
  primitive kind = primitive::all_reduce;
  double fraction = 1; // of the period's bytes
};

/// The runtime's announcement of an upcoming communication period (RFabric §5.3): the RL
/// stage, the dominant primitive mix, the group and the expected volume.
struct fabric_intent {
  std::string owner; // the job (or deployment) the period belongs to
  fabric_stage stage = fabric_stage::train_compute;
  std::vector<primitive_share> mix;
  std::vector<rank_ref> members;
  double bytes = 0;        // expected bytes per member in the period
  uint32_t group_size = 0; // members form consecutive groups of this size; 0: one group
  // All-to-all: each member's share of every sender's bytes in its group (expert load, mFabric
  // §5.1); empty: uniform.
  std::vector<double> receive_weights;
  // mFabric App. B: weigh by the traffic monitor's prediction of this MoE layer's load in this
  // iteration (a layer's first all-to-all, planned before its gating runs).
  bool predicted = false;
  uint64_t iteration = 0;
  uint32_t layer = 0;

  /// What makes two periods the same recurring period: owner, stage, primitives, members.
  std::string signature() const;
};

/// Where a plan may commit (RFabric §5.3, §5.2; OrchestrRL §2.2).
enum class window_kind : uint8_t {
  stage_boundary,      // inside a Train iteration: the dominant primitive or group changes
  iteration_boundary,  // between iterations
  deployment_boundary, // Gen: the parallelism/layout changes (OrchestrRL §4.1)
  before_broadcast,    // Weight Sync: right before the dissemination starts
  in_step,             // anywhere else (inside a Gen step, mid-collective)
};

template <>
struct enum_names<window_kind> {
  static constexpr std::array<std::pair<window_kind, std::string_view>, 5> table{{
    {window_kind::stage_boundary, "stage-boundary"},
    {window_kind::iteration_boundary, "iteration-boundary"},
    {window_kind::deployment_boundary, "deployment-boundary"},
    {window_kind::before_broadcast, "before-broadcast"},
    {window_kind::in_step, "in-step"},
  }};
};

struct commit_window {
  window_kind kind = window_kind::stage_boundary;
  double expected_s = 0; // collective-free time the runtime expects
};

/// Circuits between two endpoints a < b of one allocation.
struct circuit_count {
  uint32_t a = 0;
  uint32_t b = 0;
  uint32_t circuits = 0;
  friend bool operator==(const circuit_count&, const circuit_count&) = default;
};

/// The circuits of a plan as the flow model needs them: per PoD over pod_demand endpoints
/// (its ToRs, then the boundary), and across PoDs.
struct circuit_layout {
  std::vector<std::vector<circuit_count>> agg;
  std::vector<circuit_count> core;
};

/// What became of an owner's intent or window.
enum class fabric_outcome : uint8_t {
  committed, // the new plan is on the devices
  unchanged, // nothing to do: no intent, or the plan equals the one in force
  deferred,  // not in this window; retried in a later one
  kept,      // no valid plan: the previous one stays, retried later
};

template <>
struct enum_names<fabric_outcome> {
  static constexpr std::array<std::pair<fabric_outcome, std::string_view>, 4> table{{
    {fabric_outcome::committed, "committed"},
    {fabric_outcome::unchanged, "unchanged"},
    {fabric_outcome::deferred, "deferred"},
    {fabric_outcome::kept, "kept"},
  }};
};

/// The controller's answer to an intent or a window.
struct fabric_decision {
  std::string owner;
  fabric_outcome outcome = fabric_outcome::unchanged;
  std::string reason;
  uint64_t version = 0;   // of the plan in force afterwards
  uint32_t circuits = 0;  // of that plan
  uint32_t changed = 0;   // cross-connects removed plus added
  double reconfig_s = 0;  // slowest device's measured update
  double exposed_s = 0;   // update time the window did not cover
};

struct fabric_plan_status {
  std::string owner;
  fabric_stage stage = fabric_stage::train_compute;
  uint64_t version = 0;
  uint32_t circuits = 0;
  std::vector<std::string> devices;
};

/// mFabric §5.1: one MoE layer's dispatch in one iteration, tokens to each member of the
/// owner's all-to-all (what its gating decided).
struct expert_load {
  std::string owner;
  uint64_t iteration = 0;
  uint32_t layer = 0;
  std::vector<double> tokens;
};

/// What one pipeline stage ran in a profiled training step (Opus §4.2): the topo_id digit each
/// of its collectives needed, in order (0: PP Send/Recv, d: symmetrical dimension d).
struct opus_trace {
  int stage = 0;
  std::vector<int> digits;
};

/// A parallelism phase of a stage's step: its operations first..last all need `digit`.
struct opus_phase {
  int stage = 0;
  int digit = 0;
  uint32_t first = 0;
  uint32_t last = 0;
};

/// An Opus job on photonic rails: its layout and one rail OCS per rail it uses, and (once its
/// shims profiled a step) the stages' traces to learn the phase table from.
struct opus_job {
  std::string job;
  int pp = 1;
  std::vector<int> symmetrical;
  std::vector<std::string> rails;
  std::string initial; // topo_id digits the rails start in
  std::vector<opus_trace> traces;
  // Rank r on port first_port + r of every rail (Opus §7: jobs share rails on disjoint
  // ports); 0 in a request: the lowest range free on all its rails.
  uint32_t first_port = 0;
};

/// The job runs on its rails in topology `topo`; `phases` is its phase table so far (Opus
/// §4.2: what the shims' O1 and provisioning go by), per stage in order.
struct opus_registration {
  std::string topo;
  std::vector<opus_phase> phases;
  uint32_t first_port = 0;
  std::vector<std::string> servers; // rank r's server (wired to port first_port + r), or ""
};

/// An Opus job as `loom fabric` lists it.
struct opus_job_status {
  std::string job;
  std::vector<std::string> rails;
  std::string topo;
  uint32_t first_port = 0;
  uint32_t ranks = 0;
  bool fallback = false;
};

/// Everything the fabric controller runs: committed plans by owner, and Opus jobs.
struct fabric_listing {
  std::vector<fabric_plan_status> plans;
  std::vector<opus_job_status> opus;
};

/// A rank's (or a stage's) topo_write: which group and operation it is ready for, how many
/// writers the group has, and the digit its stage needs (Opus §4.1).
struct topo_write {
  std::string group;
  uint64_t op_index = 0;
  int group_size = 1;
  int stage = 0;
  uint8_t digit = 0;
};

struct topo_ack {
  std::string topo;      // the job's topo_id after the write's transition
  bool fallback = false; // the rails run the static giant ring (Opus §4.2 faults)
};

} // namespace loom
