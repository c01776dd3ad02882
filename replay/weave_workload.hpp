#pragma once
// The jobs a WEAVE replay runs: generated from WEAVE Table 6 profiles (§6.5) with a seed, or
// read from a JSONL trace (one job per line, the job-spec keys plus arrival and lifetime).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replay/rollout_model.hpp"
#include "types/config_error.hpp"
#include "types/names.hpp"
#include "types/scheduler.hpp"

namespace loom::replay {

struct job_arrival {
  rl_job job;               // `iterations` is its whole work
  std::string profile;      // e.g. "RH-Large", or "trace"
  double arrival_s = 0;
  drift_template drift;
  double fail_after_s = -1; // crash this long after arrival; negative: never
  double recovery_s = 0;    // then resubmitted after this long (WEAVE §5.3)
};

enum class table6_profile { balanced, rollout_heavy, train_heavy, mixed };
enum class drift_mode { none, increasing, decreasing, mixed };

} // namespace loom::replay

namespace loom {

template <>
struct enum_names<replay::table6_profile> {
  static constexpr std::array<std::pair<replay::table6_profile, std::string_view>, 4> table{{
    {replay::table6_profile::balanced, "bl"},
    {replay::table6_profile::rollout_heavy, "rh"},
    {replay::table6_profile::train_heavy, "th"},
    {replay::table6_profile::mixed, "mixed"},
  }};
};

template <>
struct enum_names<replay::drift_mode> {
  static constexpr std::array<std::pair<replay::drift_mode, std::string_view>, 4> table{{
    {replay::drift_mode::none, "none"},
    {replay::drift_mode::increasing, "increasing"},
    {replay::drift_mode::decreasing, "decreasing"},
    {replay::drift_mode::mixed, "mixed"},
  }};
};

} // namespace loom

namespace loom::replay {

struct workload_generator {
  table6_profile profile = table6_profile::mixed;
  double mix[3] = {1, 1, 1};     // relative weights of BL, RH, TH in a mixed workload
  std::vector<std::string> sizes{"small", "medium", "large"};
  int jobs = 200;
  double span_h = 336;          // arrivals (Poisson) spread over this window
  double lifetime_mean_h = 14.4; // log-normal lifetimes (Philly trace: mean 14.4 h)
  double lifetime_sigma = 1.0;
  double lifetime_max_h = 142.9;
  double slo_min = 1.0;          // SLO ~ Unif(slo_min, slo_max)
  double slo_max = 2.0;
  drift_mode drift = drift_mode::none;
  double failure_probability = 0;
  double recovery_h = 1;
};

std::vector<job_arrival> generate_workload(const workload_generator& g, uint64_t seed);

/// Reads a JSONL trace. Each line: the keys of a job spec (see scheduler/job_spec.hpp) plus
/// `arrival_h` (required), `lifetime_h` (when `iterations` is absent), and optionally
/// `drift_slope`, `fail_after_h`, `recovery_h`. Errors name "FILE:LINE".
std::optional<std::vector<job_arrival>> load_trace(const std::string& path,
                                                   std::vector<config_error>& errors);

} // namespace loom::replay
