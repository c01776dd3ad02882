#pragma once
// An RL job spec as users write it (a TOML file for `loom submit`, the same keys in replay
// scenarios and JSONL traces). The store's record of a job is store/codecs' job_record.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types/config_error.hpp"
#include "types/scheduler.hpp"

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

/// The job as a spec file's text (what `loom submit` sends): parse_job_spec reads it back to
/// the same job, every number exactly.
std::string format_job_spec(const rl_job& job);

} // namespace loom
