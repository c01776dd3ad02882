#pragma once
// One generation deployment run against its engines (OrchestrRL Alg. 1 over real engines),
// pure: the controller actor feeds it what engines, the router, the planner and the balancer
// say, and it decides what to tell the engines. It keeps
//  - the engines and the layout of instances over them (an engine that joins gets instances
//    of the current config; one that is lost takes its instances along, and its requests are
//    placed again from their prompts);
//  - the step's requests: where each is (on an instance, moving, held by a reconfiguration,
//    finished) and how far it got, from the engines' per-tick stats;
//  - the commands in flight, with deadlines: one not answered in time is sent again, then
//    abandoned and its engine treated as lost;
//  - a reconfiguration's phases (drain every engine, reshard every engine, admit the requests
//    as the planner placed them), each waiting for every engine's answer;
//  - migrations: the source releases the requests, then the destination admits them with
//    their KV transferred or recomputed, whichever is cheaper (App. A).
// Events 1 and 2 of Alg. 1 run on ticks: a tick comes when every serving instance has
// reported since the last (or two tick periods after it, with whoever did).
//
// Every mutator may queue commands and records; the caller takes them (take_commands,
// take_records) and makes the deployment's record durable before sending the commands
// (take_dirty). Time is the caller's, in seconds.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "generation/deployment_config.hpp"
#include "generation/engine_model.hpp"
#include "types/generation.hpp"

namespace loom {

class deployment_runtime {
public:
  deployment_runtime(const engine_model& engine, deployment_config config);

  const deployment_config& config() const { return config_; }

  // -- engines -------------------------------------------------------------------------------

  /// Why the engine may not join (a wrong size, or the budget is served), or nothing.
  std::optional<std::string> refusal(const engine_hello& h) const;
  void join(const engine_hello& h, double now);
  void lose(const std::string& engine, const std::string& why, double now);
  /// An instance's load on a tick. False, and nothing of it taken but the engine's sign of
  /// life, when it lists more requests than the step has: no engine runs more, and a report
  /// of any length would cost every later tick its length (a hostile or broken engine).
  bool on_stats(const instance_stats& s, double now);
  bool knows(const std::string& engine) const;
  /// Engines registered, alive or restored and not yet back.
  bool has_engines() const { return !engines_.empty(); }

  // -- steps ---------------------------------------------------------------------------------

  enum class step_admission : uint8_t {
    started,  // a new step: its placement follows (placement() once placed)
    current,  // the step is already running: placement() answers now
    done,     // the step already finished: done_outcome() answers
    busy,     // another step is still running
    no_engines,
  };
  step_admission start_step(const step_batch& batch, double now);
  /// Where the current step's requests run; nothing while they are not all placed.
  std::optional<step_placement> placement() const;
  std::optional<step_outcome> done_outcome(uint64_t step) const;
  /// The outcome of the last step that ended, if any.
  std::optional<step_outcome> last_outcome() const;

  /// Finishes reported by an engine: the ones new to the step (to make durable), and the
  /// step's outcome if that was its last request.
  struct finished_result {
    std::vector<request_done> fresh;
    std::optional<step_outcome> step_done;
    std::string refused; // why the report was refused (another step's, or no step runs)
  };
  finished_result on_finished(const requests_finished& r, double now);
  /// The requests of the step that ran last (or runs) that finished, with their output lengths.
  std::vector<request_done> step_outputs() const;

  // -- commands ------------------------------------------------------------------------------

  void on_ack(const command_ack& a, double now);
  /// Commands past their deadline are sent again or abandoned; engines restored from the
  /// record that never came back, or that lead an instance and stopped reporting, are lost. A
  /// step past its timeout is aborted: its outcome, for its routers.
  std::optional<step_outcome> expire(double now);
  /// Ends the running step unfinished (its timeout, or an operator): the engines release its
  /// requests, its routers hear why. Nothing when no step runs.
  std::optional<step_outcome> abort_step(const std::string& why, double now);
  /// An operator's layout (`loom generation reconfigure`): every instance of `layout` the
  /// engines hold, switched to as a planner's decision is (drain, reshard, admit), mid-step
  /// once the moves in flight settle; the requests go to the emptiest instances. Why not, when
  /// it cannot be (a switch under way, no instance fits, or it already serves that).
  std::optional<std::string> force_layout(const parallel_config& layout, double now);
  /// When expire or a tick is next due, if anything waits.
  std::optional<double> next_deadline() const;

  // -- Alg. 1: ticks, the planner and the balancer --------------------------------------------

  bool tick_due(double now) const;
  /// A monitoring tick: the balancer's input (Event 2) and, when due, the planner's (Event 1).
  struct tick_work {
    std::optional<std::vector<gen_worker>> balance;
    std::optional<gen_snapshot> plan;
  };
  tick_work tick(double now);
  void on_migrations(const std::vector<migration>& moves, double now);
  void balance_failed() { balancing_ = false; }
  /// A plan wanted outside ticks: a new step's batch, or requests to place again.
  std::optional<gen_snapshot> plan_now(double now);
  /// Between steps, once the planner has learned the last one: the next step as the planner
  /// may foresee it (the last batch again, nothing generated yet), so that the deployment the
  /// next batch wants is set up while the framework trains and syncs weights, where the switch
  /// is hidden (OrchestrRL §5.2: weight sync has ample slack), not at the next step's start.
  std::optional<gen_snapshot> next_step_snapshot();
  void on_decision(const gen_decision& d, double now);
  void plan_failed() {
    planning_ = false;
    snapshot_between_steps_ = false;
  }

  // -- what the caller takes after each call --------------------------------------------------

  std::vector<gen_command> take_commands();
  std::vector<gen_record> take_records();
  /// The record changed in a way that must be durable before the commands go out.
  bool take_dirty();

  // -- persistence and status -----------------------------------------------------------------

  deployment_record record() const;
  std::optional<step_record> current_step() const;
  /// After a restart: the record, the current step's batch and its finishes so far. Engines
  /// count as away until they register again; requests are placed where engines report them.
  void restore(const deployment_record& r, const std::optional<step_record>& step,
               const std::vector<request_done>& finished, double now);
  gen_status status() const;
  gen_deployment serving() const;
  reconfig_phase phase() const { return phase_; }

private:
  enum class place : uint8_t { unplaced, on_instance, moving, held, finished, unknown };
  static constexpr size_t places = 6;
  struct request {
    uint64_t id = 0;
    int64_t prompt = 0;
    int64_t generated = 0;
    bool kv_resident = false;
    place where = place::unplaced;
    uint32_t instance = 0;   // on_instance, moving: the source; admitted: the destination
    uint32_t to = 0;         // moving: the destination
    double unknown_since = 0;
    int64_t output = 0;      // finished
  };
  struct engine_entry {
    engine_hello hello;
    bool alive = false;
    double seen = 0;         // joined or last reported
    std::vector<parallel_config> ran{}; // configs it ran, which it keeps pre-mapped (§4.1)
  };
  struct instance_entry {
    std::vector<std::string> engines;
    parallel_config config{};
    bool serving = false;    // its shards are loaded (reshard answered)
    std::optional<instance_stats> stats{};
    bool fresh = false;      // reported since the last tick
    double reported = -1;
    int64_t preemptions_seen = 0;
    pace_estimate pace;      // its rate over the reports (the balancer's trust in it)
  };
  struct in_flight {
    pending_command pending;
    double deadline = 0;
  };

  // engines and layout (deployment_runtime.cpp)
  std::vector<std::string> idle_engines() const;
  void extend_layout(double now);
  void drop_instances_of(const std::string& engine, double now);
  /// The serving instances (every one, with `all`), the layout config's first: the order of
  /// the planner's instances (a mixed deployment's latency instances last).
  std::vector<uint32_t> serving_ids(bool all = false) const;
  gen_deployment deployment_of(const std::vector<uint32_t>& ids) const;
  bool leads(const std::string& engine) const;
  /// The configs every engine ran: a switch to one skips the engines' warm-up.
  std::vector<parallel_config> standby() const;
  void ran(const std::string& engine, const parallel_config& c);
  double gpu_budget() const;
  // commands (runtime_commands.cpp)
  uint64_t send(gen_command c, double now);
  /// `c` to every engine alive; a reshard carries each engine's share of its slots.
  void command_engines(const gen_command& c, double now);
  /// The engines of the spanning instances among `slots`, as they registered: how a follower
  /// finds its instance's lead, and which ranks are whose.
  std::vector<engine_hello> peers_of(const std::vector<instance_slot>& slots) const;
  void forget_commands_to(const std::string& engine);
  void on_drain_ack(const command_ack& a);
  void on_reshard_ack(const command_ack& a, const gen_command& sent);
  void on_admit_ack(const command_ack& a, const gen_command& sent, double now);
  void on_migrate_ack(const command_ack& a, const gen_command& sent, double now);
  bool awaiting(gen_command_kind kind) const;
  void advance_phase(double now);
  void admit_resumed(double now);
  void finish_reconfiguration(double now);
  void admit_to(uint32_t instance, std::vector<admitted_request> requests, bool resume,
                double now);
  admitted_request moved(uint64_t id, const request& r, const instance_entry& dst);
  // planning and placement (runtime_plan.cpp)
  void begin_reconfiguration(const gen_decision& d, double now);
  void place_as_dispatched(double now);
  bool has_unplaced() const;
  void resolve_unknown(double now);
  void maybe_apply_pending(double now);
  gen_snapshot make_snapshot(double now);
  void note(std::string text);
  void emit(gen_record r, double now);
  double step_s(double now) const { return now - step_started_; }
  request* find(uint64_t id);
  /// The engine may report the request finished: it serves the instance the request is on
  /// (or moving to), released it, or the request's place is unknown after a drain or restart.
  bool runs_on(const request& r, const std::string& engine) const;
  /// Moves a request (the per-place counts follow).
  void set_place(request& r, place p);
  int64_t count(place p) const { return in_place_[size_t(p)]; }
  int64_t unfinished() const { return int64_t(requests_.size()) - count(place::finished); }
  void load_batch(const std::vector<gen_pending>& batch, place where, double now);

  const engine_model* engine_;
  deployment_config config_;

  std::map<std::string, engine_entry> engines_;
  uint64_t epoch_ = 0;
  parallel_config layout_config_; // the (first) config of the layout: what a joining engine runs
  std::map<uint32_t, instance_entry> instances_;
  uint32_t next_instance_ = 0;

  std::optional<uint64_t> step_;      // the current step, while it runs
  std::string step_address_;          // its router's: engines fetch its prompts there
  std::vector<request> requests_;     // its batch, in the router's order
  std::unordered_map<uint64_t, uint32_t> index_; // request id -> position in requests_
  std::array<int64_t, places> in_place_{};       // requests per place
  std::vector<int64_t> finished_since_; // outputs since the last snapshot
  int64_t last_finished_at_ns_ = 0;
  double step_started_ = 0;
  int64_t step_preemptions_ = 0;
  bool placed_ = false;               // the batch has its first placement
  size_t round_robin_ = 0;
  struct done_step {
    uint64_t step = 0;
    int64_t at_ns = 0;
    uint64_t requests = 0;
    std::string aborted; // why it ended unfinished; empty: it finished
  };
  std::optional<done_step> last_done_;

  std::map<uint64_t, in_flight> commands_;
  uint64_t next_command_ = 1;

  reconfig_phase phase_ = reconfig_phase::none;
  std::string reconfig_from_;
  struct switch_clock { // the switch under way, for its accounting (not kept over a restore)
    double started = 0;
    double planned_s = 0; // C_sw + C_mig
    double kv_s = 0;      // the KV moved so far, the slowest instance's
    std::string detail;
  };
  std::optional<switch_clock> switching_;
  std::map<uint64_t, uint32_t> assignment_; // request -> instance of the new layout
  std::map<uint64_t, admitted_request> held_; // with the engine that released it
  std::optional<gen_decision> pending_decision_; // waits for migrations to settle
  uint64_t decision_epoch_ = 0;                  // the epoch the pending decision is for

  bool planning_ = false;
  bool balancing_ = false;
  double next_plan_at_ = 0;
  double last_tick_ = 0;
  std::vector<uint64_t> snapshot_ids_;        // the planner's requests, in its order
  std::vector<uint32_t> snapshot_instances_;  // its instance indices, as instance ids
  uint64_t snapshot_epoch_ = 0;
  bool snapshot_between_steps_ = false;       // it foresaw the next step: nothing to place
  std::vector<uint32_t> balance_instances_;   // the balancer's worker ids, as instance ids
  double last_solve_ms_ = 0;
  double forecast_mean_tokens_ = 0;

  gen_counters counters_;
  std::vector<std::string> recent_;

  std::vector<gen_command> outbox_;
  std::vector<gen_record> records_;
  bool dirty_ = false;
};

} // namespace loom
