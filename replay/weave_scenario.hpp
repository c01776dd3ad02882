#pragma once
// A WEAVE replay scenario (TOML): the cluster, the workload (a Table 6 generator with its seed,
// or a JSONL trace), the policies to compare, and the knobs they share.
//
//   [scenario]  name, kind = "weave", seed or seeds = [..], cluster (config path, relative to the scenario;
//               absent: the embedded defaults), policies = ["weave", "solo-d", ...]
//   [policy]    max_group_size, admission_bound, tail_migration (bool), tail_migration_threshold,
//               topology_aware_sync (bool)
//   [workload]  profile (bl|rh|th|mixed), sizes, jobs, span_h, lifetime_mean_h,
//               lifetime_sigma, lifetime_max_h, slo_min, slo_max, drift
//               (none|increasing|decreasing|mixed), failure_probability, recovery_h,
//               median_length_fraction, length_sigma, batch; or trace = "FILE.jsonl"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "replay/scenario_file.hpp"
#include "replay/weave_workload.hpp"

namespace loom::replay {

/// Policy names a scenario may list, in report order.
const std::vector<std::string>& weave_policy_names();

struct weave_scenario {
  std::string name;
  std::string source;
  uint64_t seed = 1;            // the seed this scenario's jobs were drawn with
  std::vector<uint64_t> seeds;  // every seed to replay (seed first); one report each
  loom::config config; // cluster and WEAVE policy in force
  std::vector<std::string> policies;
  bool migrate_tails = true;
  std::string workload_source; // "table6 ..." or the trace path
  response_lengths lengths;
  std::vector<job_arrival> jobs;
  std::optional<workload_generator> generator; // absent for a trace
  // WEAVE §5 (1)(2): every job is submitted with `profile = true`, its worst cases and
  // footprints left for the one-shot profiling pass to measure (the workload's own figures are
  // what the simulated frameworks measure there).
  bool profiled = false;
};

/// The same scenario under another seed: the generator draws its jobs again (a trace keeps its
/// jobs; the seed still drives the realized iterations and the random policy).
weave_scenario with_seed(const weave_scenario& sc, uint64_t seed);

/// The response-length draws of the scenario's seed, to share between its policies.
std::shared_ptr<length_draws> length_draws_of(const weave_scenario& sc);

scenario_result<weave_scenario> load_weave_scenario(const std::string& path);

} // namespace loom::replay
