#pragma once
// Batches of rollout requests for the generation replay, one per RL step: synthesized
// (OrchestrRL Fig. 3a: heavy-tailed output lengths, most below 7.5K tokens, a tail to the
// maximum, the median drifting across steps as training lengthens responses; optionally in
// GRPO prompt groups, §2's workload, whose samples' lengths correlate) or read from the
// Azure LLM inference trace, whose short chat outputs are scaled up (the report says by how
// much).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "replay/sim_generation.hpp"
#include "types/config_error.hpp"

namespace loom::replay {

struct gen_length_generator {
  int steps = 8;
  int batch = 512;
  int64_t max_tokens = 16384;
  int64_t prompt_min = 256;
  int64_t prompt_max = 1024;
  double median_tokens = 2500;  // of the first step's output lengths
  double sigma = 0.9;           // log-normal shape: the heavy tail
  double drift_per_step = 0.03; // the median grows by this fraction per step
  // GRPO samples `group_size` responses per prompt: a group shares its prompt and this share
  // of the log-length variance (their lengths correlate; the marginal stays log-normal).
  int group_size = 1;
  double group_correlation = 0;
};

std::vector<std::vector<gen_sample>> generate_gen_workload(const gen_length_generator& g,
                                                           uint64_t seed);

struct gen_trace_options {
  std::string path; // CSV: TIMESTAMP,ContextTokens,GeneratedTokens
  int steps = 8;
  int batch = 512;
  int64_t max_tokens = 16384;
  double output_scale = 1; // GeneratedTokens x scale, capped at max_tokens
  double prompt_scale = 1;
};

/// Consecutive rows make the steps' batches (wrapping around the trace); errors name the file
/// and line.
std::optional<std::vector<std::vector<gen_sample>>>
load_gen_trace(const gen_trace_options& options, std::vector<config_error>& errors);

} // namespace loom::replay
