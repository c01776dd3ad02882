#pragma once
// One simulated inference engine (a node's server) obeying the live runtime's commands: it
// drains its instances, reshards to a new layout (loading weights takes C_sw: the restart, a
// shorter one to a config it ran before and keeps pre-mapped, and each GPU's new shard over
// PCIe), admits requests (a resumed instance starts once the KV
// moved onto it has arrived; a migrated request arrives after its own transfer, App. A), and
// releases requests to migrate. Its instances run instance_sim. Replay's simulated engines
// and `loom-example-engine` (at wall-clock speed) both run it, so a live run and its replay
// share every modelled duration. Pure: its time is the caller's, in seconds.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "generation/config_search.hpp"
#include "generation/engine_model.hpp"
#include "generation/instance_sim.hpp"
#include "generation/kv_migration.hpp"
#include "types/generation.hpp"

namespace loom {

/// The durations the simulated engine takes (the planner estimates the same ones).
struct engine_sim_costs {
  double engine_restart_s = 3.0;  // tearing instances down and warming the new ones up
  double standby_restart_s = 1.35; // ... when the new config is one it ran: kept pre-mapped
  double weight_load_gbps = 25;   // each GPU loads its new shard from host memory, GB/s
  kv_transfer_path kv_path;

  /// Resharding to `c` (C_sw): the restart, then each GPU's shard.
  double reshard_s(const engine_model& engine, const parallel_config& c, bool standby) const;
};

/// The durations the planner's cost model assumes, for engines that take the same.
engine_sim_costs engine_sim_costs_of(const planner_params& p);

class engine_sim {
public:
  /// How many tokens a request will generate in all (the workload knows; engines find out).
  using output_lookup = std::function<int64_t(uint64_t request)>;

  engine_sim(const engine_model& engine, std::string id, parallel_config loaded,
             engine_sim_costs costs, output_lookup output_of);

  /// A command's answer and when it is due (a reshard answers once its weights are loaded).
  /// A command seen before gets its first answer again.
  struct answer {
    command_ack ack;
    double due_s = 0;
  };
  answer apply(const gen_command& c, double t);

  /// Runs every instance up to `t`, landing the requests whose KV arrived on the way.
  void advance_to(double t);

  /// The load of every instance it leads, as of the last advance.
  std::vector<instance_stats> stats() const;

  /// Requests finished since the last call, with the engine time they finished at.
  struct finish {
    uint64_t id = 0;
    uint64_t step = 0; // as its admission said
    int64_t output_tokens = 0;
    double at_s = 0;
  };
  std::vector<finish> take_finished();

  const std::string& id() const { return id_; }
  uint64_t epoch() const { return epoch_; }
  bool idle() const;
  /// Preemptions on all its instances so far, those torn down included.
  int64_t preemptions() const;
  /// Why an instance can never run its queue (a sequence beyond its whole KV cache), if so.
  std::optional<std::string> stuck() const;

private:
  struct arrival {
    double ready_s = 0;
    uint64_t id = 0;
    sim_request state;
  };
  struct hosted {
    instance_sim sim;
    std::vector<arrival> arrivals; // by ready time
    size_t harvested = 0;
  };

  answer drain(const gen_command& c, double t);
  answer reshard(const gen_command& c, double t);
  answer admit(const gen_command& c, double t);
  answer release(const gen_command& c, double t);
  request_state state_of(uint64_t id, const sim_request& s, bool running) const;
  sim_request resume_state(const admitted_request& r, bool kv) const;
  void harvest(hosted& h);

  const engine_model* engine_;
  std::string id_;
  std::vector<parallel_config> loaded_; // the configs whose shards it holds
  std::vector<parallel_config> standby_; // every config it ran, kept pre-mapped (§4.1)
  engine_sim_costs costs_;
  output_lookup output_of_;
  uint64_t epoch_ = 0;
  std::map<uint32_t, hosted> instances_;   // the instances it leads
  std::unordered_map<uint64_t, int64_t> prompts_; // prompt tokens of every request it holds
  std::unordered_map<uint64_t, uint64_t> steps_;  // the step of every request it holds
  std::map<uint64_t, answer> answered_;    // recent commands, for repeats
  std::vector<finish> finished_;
  int64_t retired_preemptions_ = 0;        // of instances torn down
};

} // namespace loom
