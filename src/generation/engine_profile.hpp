#pragma once
// Measured decode-step times (OrchestrRL §4.1: the planner's T_k comes from offline
// profiling), per parallel config, as a line in the batch size B and the batch's total
// context C (the KV tokens a step reads):
//
//   step_ms = fixed_ms + per_request_ms * B + per_kilotoken_ms * C / 1000
//
// An operator fits it from their engine's own step times (vLLM's per-step metrics at a few
// batch sizes and context lengths); fit_step_line does the least-squares fit. Configs the
// profile does not list fall back to the roofline. Pure.

#include <optional>
#include <string>
#include <vector>

#include "types/generation.hpp"

namespace loom {

struct step_line {
  double fixed_ms = 0;
  double per_request_ms = 0;
  double per_kilotoken_ms = 0;
};

struct profiled_config {
  parallel_config parallel;
  step_line decode;
  double prefill_tokens_per_s = 0; // 0: the roofline's prefill
  int64_t kv_tokens = 0;           // KV-cache tokens an instance holds; 0: the roofline's
};

struct engine_profile {
  std::string model;
  std::string gpu;
  std::string source; // where the numbers come from, for the report
  std::vector<profiled_config> configs;

  const profiled_config* find(const parallel_config& c) const;
};

/// One measured step: `batch` running requests holding `context_tokens` in all took `step_ms`.
struct step_sample {
  double batch = 0;
  double context_tokens = 0;
  double step_ms = 0;
};

/// Least-squares step_line through the samples, coefficients kept non-negative (a step never
/// gets faster with more work): nothing if the samples do not determine it (fewer than three,
/// or batch and context never vary independently).
std::optional<step_line> fit_step_line(const std::vector<step_sample>& samples);

} // namespace loom
