#pragma once
// Intra-group execution, WEAVE §4.3 and §5.1, pure: the run permits of one co-execution group.
// A job's phases cycle rollout -> training -> sync. Every rollout node and the training pool
// serve the group's jobs strictly in round-robin turn order, (round, join position): each job
// runs each phase once per meta-iteration and nobody repeats a phase before the others have had
// their turn. This is the schedule Algorithm 1 simulated at admission; with a fixed order on
// every resource, start times only shrink when phases run shorter than their worst case, so
// iterations end no later than planned (conservative planning, §4.2); a single iteration's
// length is bounded only by iteration_bounds() (meta_iteration.hpp). A phase that
// follows another job's phase on the same GPUs pays a switch: warm from host DRAM once its
// state is resident there, cold the first time. Long-tail migration: when a rollout reports
// that the tail threshold of its responses is done and the next rollout on its nodes is
// waiting, the rest is consolidated onto a few GPUs and the freed GPUs start the next rollout
// at once (elastically: it grows as more GPUs free up).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/phase_costs.hpp"
#include "types/scheduler.hpp"

namespace loom {

struct executor_actions {
  std::vector<phase_grant> grants;
  std::vector<gpu_resize> resizes;
};

/// A member's place in the turn order: its join position and the round of its next rollout.
struct turn_place {
  uint64_t position = 0;
  uint64_t round = 0;
};

class round_robin {
public:
  /// `tail_threshold` in (0, 1]: fraction of responses done that makes a rollout tail-bound;
  /// `migrate_tails` false disables long-tail migration (the ablation).
  round_robin(int gpus_per_rollout_node, int training_gpus, double tail_threshold,
              bool migrate_tails);
  /// Names grants give their GPUs: the rollout pool's nodes by index (unnamed: "#N"), and the
  /// training pool's devices, which every training grant runs on.
  void name_nodes(std::shared_ptr<const std::vector<std::string>> rollout_names,
                  std::vector<node_devices> training_pool);

  /// A job joins at the end of the turn order, from the next round nobody has started: its
  /// first phases follow everyone else's. Its rollout GPUs fill its nodes in order; `switches`
  /// are what its phases cost after another job's. `staged`: its state is already in the host
  /// DRAM of its nodes, so its first phases start warm. `at`: the place it held before a
  /// restart, kept instead (its rollout and training come at that round, in that position).
  executor_actions add(const group_member& m, phase_switches switches, bool staged,
                       std::optional<turn_place> at = std::nullopt);
  /// A job leaves (finished, failed, cancelled): its queued phases go, its GPUs are freed.
  executor_actions remove(const std::string& job);
  /// The worker finished a phase the executor granted.
  executor_actions phase_done(const std::string& job, phase_kind phase);
  /// The job's running rollout reached the tail threshold.
  executor_actions tail_bound(const std::string& job);

  bool contains(const std::string& job) const { return members_.count(job) > 0; }
  size_t size() const { return members_.size(); }
  std::vector<std::string> jobs() const;
  /// The phase the job is running or waiting for.
  std::optional<phase_kind> current_phase(const std::string& job) const;
  /// The phase the job runs now, if it was permitted and not yet reported done.
  bool running(const std::string& job) const;
  /// Its place in the turn order: its position and the round of its current iteration's
  /// rollout (where it resumes after a restart, running that iteration again).
  std::optional<turn_place> place_of(const std::string& job) const;
  /// Why the member's next phase is not permitted yet, in words, naming its nodes; empty
  /// while it runs or if it is not a member.
  std::string wait_reason(const std::string& job) const;
  int free_gpus(int node) const;
  /// A rollout node's name as name_nodes() gave it ("#N" without one).
  std::string node_name(int node) const;
  /// GPUs a job holds on the rollout pool (0 unless its rollout runs).
  int rollout_gpus_held(const std::string& job) const;
  /// Jobs waiting for a rollout node / the training pool, in the order they will be served.
  std::vector<std::string> rollout_queue(int node) const;
  std::vector<std::string> training_queue() const;
  int training_gpus() const { return training_gpus_; }

private:
  struct node_state {
    int free = 0;
    std::vector<bool> busy; // per device: a running rollout holds it
    std::set<std::string> pinned; // members whose rollouts run here
    std::string last_job; // whose state is on the GPUs
    std::set<std::string> resident;
  };
  struct running_rollout {
    uint64_t order = 0;
    std::map<int, int> need;              // node -> GPUs
    std::map<int, std::vector<int>> held; // node -> its device indices
    bool tail = false;
    int total_held() const;
  };
  struct member_state {
    std::vector<int> rollout_nodes; // rollout-pool node indices it is pinned to
    int rollout_gpus = 0;
    phase_switches switches;
    phase_kind phase = phase_kind::rollout;
    uint64_t position = 0;      // join order: the turn order within a round
    uint64_t rollout_turn = 0;  // round of its next rollout
    uint64_t training_turn = 0; // round of its next training
  };
  using turn = std::pair<uint64_t, uint64_t>; // (round, position)

  executor_actions dispatch();
  /// Running rollouts that started on part of their GPUs take freed ones, oldest first.
  void grow_rollouts(executor_actions& out);
  /// Waiting rollouts next on all their nodes start on whatever GPUs are free.
  void start_rollouts(executor_actions& out);
  /// The training pool serves the next job in turn if it is free.
  void start_training(executor_actions& out);
  node_state& node(int id);
  /// Takes up to `count` of the node's free devices, lowest first, into `into`.
  static void take(node_state& ns, int count, std::vector<int>& into);
  /// Gives back the last `count` devices of `from`.
  static void give(node_state& ns, std::vector<int>& from, size_t count);
  std::vector<node_devices> devices_of(const running_rollout& run) const;
  std::map<int, int> need_of(const member_state& m) const;
  bool waiting(const std::string& job, phase_kind phase) const;
  /// The member whose rollout is next on the node.
  const std::string* next_on_node(int node) const;
  /// The member whose training is next on the pool.
  const std::string* next_in_training() const;
  /// Of `jobs` (each named by `name_of`), the one whose (turn, position) comes first.
  template <class Jobs, class Name, class Turn>
  const std::string* first_in_turn(const Jobs& jobs, Name name_of, Turn turn_of) const;
  static std::vector<std::string> in_turn_order(std::vector<std::pair<turn, std::string>> jobs);

  int gpus_per_node_;
  std::shared_ptr<const std::vector<std::string>> rollout_names_;
  std::vector<node_devices> training_pool_;
  int training_gpus_;
  double tail_threshold_;
  bool migrate_tails_;
  uint64_t next_order_ = 0;
  uint64_t next_position_ = 0;
  std::map<std::string, member_state> members_;
  std::map<int, node_state> nodes_;
  std::map<std::string, running_rollout> rollouts_;
  std::optional<std::string> training_running_;
  std::string training_last_;
  std::set<std::string> training_resident_;
};

} // namespace loom
