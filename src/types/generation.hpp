#pragma once
// OrchestrRL's plain data (no CAF): how an instance is parallelised, a deployment of
// instances, and what the engines, the planner and the balancer tell each other (§4,
// Algorithm 1): progress snapshots up, plans and migrations down.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"

namespace loom {

/// How one generation instance is parallelised (OrchestrRL §4.1's y_k): tensor parallelism,
/// expert parallelism for MoE models, or attention-FFN disaggregation.
struct parallel_config {
  int tp = 1;       // tensor-parallel degree of attention (and of the FFN under plain TP)
  int ep = 0;       // EP: the experts are spread over `ep` GPUs, attention runs tp-way in
                    // ep / tp data-parallel groups; 0 = no EP
  int ffn_gpus = 0; // AFD: attention on `tp` GPUs, the FFN on `ffn_gpus` more; 0 = no AFD

  parallel_config() = default;
  parallel_config(int tensor_parallel) : tp(tensor_parallel) {} // NOLINT: a plain TP degree

  static parallel_config expert_parallel(int ep, int attention_tp);
  static parallel_config disaggregated(int attention_gpus, int ffn_gpus);

  bool is_ep() const { return ep > 0; }
  bool is_afd() const { return ffn_gpus > 0; }
  int gpus() const;
  /// Attention data-parallel groups inside the instance (EP), else 1.
  int attention_groups() const { return is_ep() ? ep / tp : 1; }
  /// "TP4", "EP16/TP2", "AFD4:2".
  std::string name() const;
  /// The inverse of name(); nothing if `text` is not one.
  static std::optional<parallel_config> parse(std::string_view text);

  friend bool operator==(const parallel_config&, const parallel_config&) = default;
};

/// A deployment: `instances` instances of one parallel config, and, when mixed, `latency_instances`
/// more of a config that decodes a lone request faster, numbered after the others, for the
/// longest requests (OrchestrRL §4.1: keep a latency instance for the tail).
struct gen_deployment {
  parallel_config parallel;
  int instances = 0;
  parallel_config latency{};
  int latency_instances = 0;

  bool mixed() const { return latency_instances > 0; }
  /// Every instance, both kinds.
  int size() const { return instances + latency_instances; }
  int gpus() const;
  /// The config of instance `k` (0 <= k < size()).
  const parallel_config& config_of(int k) const { return k < instances ? parallel : latency; }
  /// "4xTP2", "2xAFD4:4", "4xTP2+1xTP8".
  std::string name() const;
  friend bool operator==(const gen_deployment&, const gen_deployment&) = default;
};

/// A pending request as the engines see it: how far it has got, never how long it will be.
struct gen_pending {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  int32_t instance = -1; // -1: not placed yet (a new step's batch)
};

/// The deployment's state for the planner. A new `step` starts a new batch: its requests are
/// all pending with nothing generated, and the planner forecasts their lengths.
struct gen_snapshot {
  uint64_t step = 0;
  gen_deployment deployment;
  int gpu_budget = 0; // GPUs of the engines it has now (0: the planner's configured budget)
  std::vector<gen_pending> pending;
  std::vector<int64_t> finished_outputs; // output lengths finished since the last snapshot
  std::vector<parallel_config> standby;  // configs every engine ran, so keeps pre-mapped
};

/// The planner's answer: keep (reconfigure false; `assignment` places unplaced requests) or
/// switch to `deployment` with every pending request re-placed.
struct gen_decision {
  gen_deployment deployment;
  std::vector<int32_t> assignment; // instance per snapshot entry, in snapshot order
  bool reconfigure = false;
  double objective_s = 0; // Eq. 1 of the chosen deployment, costs included
  double current_s = 0;   // Obj_cur
  double switch_s = 0;    // C_sw
  double migrate_s = 0;   // C_mig
  double solve_ms = 0;    // wall-clock time of the search (a measurement, not an input)
  double forecast_mean_tokens = 0; // mean forecast output length of the pending requests
};

/// Moving a request's KV onto another instance (OrchestrRL §4.1 C_mig, App. A): a direct
/// transfer over the NICs, or a recompute by replaying the forward pass on the destination.
/// A transfer makes only the moved request wait: its KV arrives while the destination's batch
/// decodes. A recompute is a prefill pass of the destination, which pauses every request
/// running there with it. App. A compares the two onto a drained instance (`busy` = 0).
struct kv_move_cost {
  double transfer_s = 0;
  double recompute_s = 0;
  /// Whether to recompute onto an instance running `busy` requests.
  bool recompute(int busy = 0) const { return recompute_s * (1 + busy) < transfer_s; }
  /// Request-seconds of waiting the cheaper way costs; with `busy` = 0, its seconds.
  double best_s(int busy = 0) const {
    return recompute(busy) ? recompute_s * (1 + busy) : transfer_s;
  }
};

/// A request as the balancer sees it.
struct gen_request {
  uint64_t id = 0;
  int64_t context_tokens = 0; // KV footprint if moved
  bool pinned = false;        // moved lately: not again yet, so requests do not ping-pong
  int64_t generated = 0;      // output tokens so far: the estimate of what it has left
  kv_move_cost move;          // its KV's move (zero: waiting, nothing to carry)
};

/// A generation instance's load on one monitoring tick (OrchestrRL §4.2).
struct gen_worker {
  uint32_t id = 0;
  std::vector<gen_request> running;
  std::vector<gen_request> waiting;
  int64_t kv_free_tokens = 0;  // KV headroom right now (M_free, in tokens)
  int max_batch = 256;         // the engine's concurrency limit
  double decode_rate_tps = 0;  // observed decode rate of one running request (tokens/s): a
                               // busy worker's per-request pace, not its summed throughput
  double pace_tps = 0;         // that rate smoothed over the ticks, and how far it swings around
  double rate_spread_tps = 0;  // it (pace_estimate): what the balancer's moves are judged on
  double peak_tps = 0;         // the fastest it has run (what it offers once idle)
};

/// One request moved by the balancer.
struct migration {
  uint64_t request = 0;
  uint32_t from = 0;
  uint32_t to = 0;
  bool was_waiting = false;
};

// -- the live runtime: engines, commands, steps (OrchestrRL Alg. 1 over real engines) ---------
//
// An engine is one node's inference server (a `gen-instance` session live, a simulated engine
// in replay). The deployment's instances (the planner's y_k) are laid out over the engines'
// GPUs; an instance wider than an engine spans several, the first leading. Instance ids are
// stable within a layout `epoch`; a reconfiguration starts a new epoch.

/// An engine announcing itself to its deployment.
struct engine_hello {
  std::string engine; // its worker id
  std::string node;
  int gpus = 0;
  bool restarted = false; // a new process under a known id: whatever it ran is gone
  std::string data_address; // where other engines pull a moved request's tokens and KV
};

/// A request as an engine reports it: how far it got, never how long it will be.
struct request_state {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  bool running = false;     // in the running batch (else waiting)
  bool kv_resident = false; // its KV is on the instance (running, or arrived with its KV)
};

/// One instance's load on one tick (OrchestrRL §4.2's inputs, vLLM's scheduler stats).
struct instance_stats {
  std::string engine;
  uint32_t instance = 0;
  uint64_t epoch = 0;
  std::vector<request_state> requests;
  int64_t kv_free_tokens = 0;
  int64_t kv_capacity_tokens = 0;
  int max_batch = 256;
  double decode_rate_tps = 0; // one running request's pace (1 / time per output token)
  int64_t preemptions = 0;    // since the instance started
};

struct request_done {
  uint64_t id = 0;
  int64_t output_tokens = 0;
  int64_t finished_at_ns = 0; // the engine's wall clock (replay: the virtual clock)
};

/// Requests an engine finished, for the step they belong to.
struct requests_finished {
  std::string engine;
  uint64_t step = 0;
  std::vector<request_done> done;
};

/// What a command asks of an engine (Alg. 1's cluster.Reconfigure and cluster.ExecBalance).
enum class gen_command_kind : uint8_t {
  drain,   // reconfiguration, phase 1: stop every instance, release its requests
  reshard, // phase 2: load the shards of the instances the engine hosts in the new layout
  admit,   // requests placed on an instance it leads (a new batch, re-placed or migrated)
  migrate, // requests to release from its instances: they move elsewhere
};

template <>
struct enum_names<gen_command_kind> {
  static constexpr std::array<std::pair<gen_command_kind, std::string_view>, 4> table{{
    {gen_command_kind::drain, "drain"},
    {gen_command_kind::reshard, "reshard"},
    {gen_command_kind::admit, "admit"},
    {gen_command_kind::migrate, "migrate"},
  }};
};

/// One instance of a layout and the engines carrying it (the first leads).
struct instance_slot {
  uint32_t instance = 0;
  std::vector<std::string> engines;
  parallel_config config{}; // what the instance runs (a mixed layout has two)
  friend bool operator==(const instance_slot&, const instance_slot&) = default;
};

/// A request placed on an instance: a new one (nothing generated), or one that moves with its
/// progress, its KV transferred from `kv_source` or recomputed from its tokens (App. A).
struct admitted_request {
  uint64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  bool kv_transfer = false;
  std::string kv_source;      // moved: the engine that released it (holds its tokens, its KV)
  std::string source_address; // that engine's data address
};

struct gen_command {
  uint64_t id = 0;
  std::string engine; // whom it is for
  gen_command_kind kind = gen_command_kind::admit;
  uint64_t epoch = 0;
  parallel_config config;           // drain, reshard: the new layout's (first) config
  std::vector<instance_slot> slots; // reshard: the instances this engine carries, each's config
  std::vector<engine_hello> peers;  // reshard: the engines of its spanning slots (GPUs, address)
  uint32_t instance = 0;            // admit: the instance, led by this engine
  uint64_t step = 0;                // admit: the RL step its requests belong to
  bool resume = false;              // admit: the instance's first batch after a reshard
  std::vector<admitted_request> requests; // admit
  std::string router_address;       // admit: where the step's prompts come from
  std::vector<migration> moves;     // migrate: the requests to release (instance ids)
};

/// An engine's answer to a command.
struct command_ack {
  uint64_t command = 0;
  std::string engine;
  bool ok = true;
  std::string detail;                  // why not, when !ok
  std::vector<request_state> released; // drain, migrate: what it let go, as it stood
  double elapsed_s = 0;                // how long it took the engine (reshard: the load)
};

/// A new RL step's batch, from the framework's router (ids unique across steps).
struct step_batch {
  uint64_t step = 0;
  std::vector<gen_pending> requests; // id and prompt_tokens
  std::string data_address;          // the router's: prompts from there, outputs to there
};

/// Where the step's requests run (the answer to a step_batch), once durable.
struct step_placement {
  uint64_t step = 0;
  gen_deployment deployment;          // the deployment they run on
  bool reconfigured = false;          // the planner switched for this step
  std::vector<uint32_t> instances;    // per request of the batch, in its order
  std::vector<std::string> engines;   // the leading engine of that instance
  bool done = false;                  // the step already finished (its outcome was lost)
  int64_t last_finished_at_ns = 0;    // when done
};

/// The step is over: every request finished.
struct step_outcome {
  std::string deployment;
  uint64_t step = 0;
  int64_t last_finished_at_ns = 0; // the latest finish, in the engines' clock
  uint64_t requests = 0;
  bool aborted = false;            // ended unfinished (its timeout, or an operator): see reason
  std::string reason;
};

/// What a deployment's planner keeps across restarts (the store's "gen_forecasts" record): its
/// forecaster's history, each finished step's shares per histogram bin, and the relative errors
/// of its predicted gains (plan_error), oldest first.
struct gen_forecast {
  std::vector<std::vector<double>> history;
  std::vector<double> plan_errors;
  friend bool operator==(const gen_forecast&, const gen_forecast&) = default;
};

/// What happened in a deployment, for observers (replay's recorder, live metrics).
enum class gen_record_kind : uint8_t {
  step_started,
  planned,         // the planner answered (solve time); reconfigure says whether it switched
  reconfigured,    // the planner's switch is under way (detail: from -> to), durable
  migrated,        // one request moved (KV transferred, recomputed, or queued without KV)
  progress,        // a monitoring tick: requests left in the step
  step_done,
  step_aborted,    // the step ended unfinished; detail says why
  forecast_scored, // the planner scored its forecast of the step that ended
  engine_lost,
  command_retried,
  command_abandoned,
  switched,        // a reconfiguration's new layout serves (switch_s, kv_s, planned_s)
};

template <>
struct enum_names<gen_record_kind> {
  static constexpr std::array<std::pair<gen_record_kind, std::string_view>, 12> table{{
    {gen_record_kind::step_started, "step_started"},
    {gen_record_kind::planned, "planned"},
    {gen_record_kind::reconfigured, "reconfigured"},
    {gen_record_kind::migrated, "migrated"},
    {gen_record_kind::progress, "progress"},
    {gen_record_kind::step_done, "step_done"},
    {gen_record_kind::step_aborted, "step_aborted"},
    {gen_record_kind::forecast_scored, "forecast_scored"},
    {gen_record_kind::engine_lost, "engine_lost"},
    {gen_record_kind::command_retried, "command_retried"},
    {gen_record_kind::command_abandoned, "command_abandoned"},
    {gen_record_kind::switched, "switched"},
  }};
};

/// How a moved request's state travels (OrchestrRL App. A).
enum class kv_mode : uint8_t { none, transfer, recompute };

struct gen_record {
  std::string deployment;
  gen_record_kind kind = gen_record_kind::progress;
  uint64_t step = 0;
  double step_s = 0;         // seconds into the step (actor clock)
  int64_t pending = 0;       // progress, step_started: requests not finished
  std::string detail;        // reconfigured: "4xTP2 -> 2xTP8"; lost, abandoned: why
  kv_mode mode = kv_mode::none; // migrated
  bool reconfigure = false;  // planned
  double solve_ms = 0;       // planned (wall clock: a measurement, not an input)
  double forecast_error = -1; // forecast_scored: histogram relative error (-1: none)
  double forecast_mean_error = -1;
  int64_t preemptions = 0;   // step_done: engine preemptions during the step
  // switched (§6.2.2's switch accounting): seconds from the drain until every new instance had
  // its requests (the engines' answers, their shard loads inside); the KV the switch moved,
  // by App. A's cost model as the runtime took it (transfer or recompute, the slowest
  // instance); and C_sw + C_mig as the planner predicted them.
  double switch_s = 0;
  double kv_s = 0;
  double planned_s = 0;
};

/// What a deployment's controller has done, counted across restarts.
struct gen_counters {
  int64_t reconfigurations = 0;
  int64_t migrations = 0;
  int64_t kv_transfers = 0;  // moved requests whose KV went over the network (App. A)
  int64_t kv_recomputes = 0; // ... and those recomputed from their tokens
  int64_t engines_lost = 0;
  int64_t commands_retried = 0;
  int64_t commands_abandoned = 0;
};

/// One deployment as `loom generation` shows it.
struct gen_status {
  std::string deployment;
  std::string model;
  int gpus = 0;               // the budget
  gen_deployment current;     // what serves now
  uint64_t epoch = 0;
  std::vector<std::string> engines;      // "id (node, N GPUs)"
  std::vector<instance_slot> instances;
  uint64_t step = 0;
  bool step_active = false;
  int64_t pending = 0;
  int64_t finished = 0;
  std::string phase;          // what a reconfiguration in progress waits for, or empty
  double forecast_mean_tokens = 0; // the planner's forecast mean output length for the step
  std::vector<std::string> recent; // last decisions, oldest first
  gen_counters counters;
  double last_solve_ms = 0;
  double last_forecast_error = -1;
};

// -- what a deployment's controller keeps durable (loom.v1 GenDeployment, GenStep) ----------

/// A command sent and not answered yet.
struct pending_command {
  gen_command command;
  int attempts = 1;
};

/// How the RL framework deals a step's batch over the instances when no planner places it:
/// round-robin, or in contiguous slices (veRL chunks a batch across DP ranks, so the samples
/// of one prompt land together).
enum class dispatch_mode : uint8_t { round_robin, contiguous };

template <>
struct enum_names<dispatch_mode> {
  static constexpr std::array<std::pair<dispatch_mode, std::string_view>, 2> table{{
    {dispatch_mode::round_robin, "round-robin"},
    {dispatch_mode::contiguous, "contiguous"},
  }};
};

/// Where a reconfiguration stands: each phase waits for every engine's answer.
enum class reconfig_phase : uint8_t { none, draining, resharding, admitting };

template <>
struct enum_names<reconfig_phase> {
  static constexpr std::array<std::pair<reconfig_phase, std::string_view>, 4> table{{
    {reconfig_phase::none, "none"},
    {reconfig_phase::draining, "draining"},
    {reconfig_phase::resharding, "resharding"},
    {reconfig_phase::admitting, "admitting"},
  }};
};

struct deployment_record {
  uint64_t epoch = 0;
  parallel_config config;
  std::vector<instance_slot> instances;
  uint32_t next_instance = 0;
  std::vector<engine_hello> engines;   // every engine it counts on
  uint64_t step = 0;
  bool step_active = false;
  uint64_t last_done_step = 0;         // the latest step that finished, and when
  int64_t last_done_at_ns = 0;
  uint64_t last_done_requests = 0;
  std::string last_done_aborted;       // why it ended unfinished; empty: it finished
  bool any_done = false;
  uint64_t next_command = 1;
  std::vector<pending_command> commands;
  reconfig_phase phase = reconfig_phase::none;
  std::string reconfig_from;           // the deployment a reconfiguration leaves
  std::vector<std::pair<uint64_t, uint32_t>> assignment; // request -> instance, its plan
  std::vector<admitted_request> held;  // released by the drain, to be admitted
  gen_counters counters;
  std::vector<std::string> recent;     // last decisions, oldest first
};

/// A step's batch as the router sent it.
struct step_record {
  uint64_t step = 0;
  std::vector<gen_pending> requests;
  std::string data_address;
};

} // namespace loom
