#pragma once
// An RL job spec as users write it (a TOML file for `loom submit`, the same keys in replay
// scenarios and JSONL traces) and as the store keeps it (loom.v1.Job).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config_error.hpp"
#include "scheduler/rl_job.hpp"

namespace loom {

class table_reader;

struct job_spec_result {
  std::optional<rl_job> value;
  std::vector<config_error> errors; // non-empty exactly when value is empty
};

/// Reads the job keys of one TOML table (name, model, rollout_gpus, training_gpus,
/// max_response_tokens, batch_size, multi_turn, rollout_host_memory_gb,
/// training_host_memory_gb, slo, worst_rollout_s, worst_training_s, model_gb, iterations).
/// `default_slo` applies when `slo` is absent. Unknown keys are errors.
std::optional<rl_job> read_job_spec(table_reader& table, double default_slo);

/// A whole job spec file's text; `source` names it in errors.
job_spec_result parse_job_spec(std::string_view text, const std::string& source,
                               double default_slo);

job_spec_result load_job_spec_file(const std::string& path, double default_slo);

/// The job as a serialized loom.v1.Job record in `state` (a loom.v1.JobState value).
std::string job_record(const rl_job& job, int state, const std::string& group,
                       const std::string& reason);

/// Decodes a loom.v1.Job record; nothing if it is not one.
std::optional<rl_job> job_from_record(std::string_view bytes);

} // namespace loom
