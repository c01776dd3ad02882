#include "scheduler/job_spec.hpp"

#include "core/toml_reader.hpp"
#include "loom.pb.h"

namespace loom {

std::optional<rl_job> read_job_spec(table_reader& t, double default_slo) {
  rl_job j;
  bool ok = true;
  auto take = [&](auto v, auto& out) {
    if (v)
      out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
    else
      ok = false;
  };
  take(t.required<std::string>("name"), j.name);
  take(t.optional<std::string>("model", ""), j.model);
  take(at_least<int64_t>(t, "rollout_gpus", t.required<int64_t>("rollout_gpus"), 1),
       j.rollout_gpus);
  take(at_least<int64_t>(t, "training_gpus", t.required<int64_t>("training_gpus"), 1),
       j.training_gpus);
  take(at_least<int64_t>(t, "max_response_tokens", t.optional<int64_t>("max_response_tokens", 0),
                         0),
       j.max_response_tokens);
  take(at_least<int64_t>(t, "batch_size", t.optional<int64_t>("batch_size", 0), 0), j.batch_size);
  take(t.optional<bool>("multi_turn", false), j.multi_turn);
  take(non_negative(t, "rollout_host_memory_gb",
                    t.required<double>("rollout_host_memory_gb")),
       j.rollout_memory_gb);
  take(non_negative(t, "training_host_memory_gb",
                    t.required<double>("training_host_memory_gb")),
       j.training_memory_gb);
  take(at_least<double>(t, "slo", t.optional<double>("slo", default_slo), 1.0), j.slo);
  take(positive(t, "worst_rollout_s", t.required<double>("worst_rollout_s")), j.rollout_s);
  take(positive(t, "worst_training_s", t.required<double>("worst_training_s")), j.training_s);
  take(non_negative(t, "model_gb", t.optional<double>("model_gb", 0.0)), j.model_gb);
  take(at_least<int64_t>(t, "iterations", t.optional<int64_t>("iterations", 0), 0),
       j.iterations);
  t.reject_unknown();
  if (!ok)
    return std::nullopt;
  j.id = j.name;
  return j;
}

job_spec_result parse_job_spec(std::string_view text, const std::string& source,
                               double default_slo) {
  job_spec_result result;
  auto doc = parse_toml(text, source, result.errors);
  if (!doc)
    return result;
  config_diagnostics diag{source};
  table_reader root{*doc, "", diag};
  auto job = read_job_spec(root, default_slo);
  result.errors = diag.take_errors();
  if (result.errors.empty())
    result.value = std::move(job);
  return result;
}

job_spec_result load_job_spec_file(const std::string& path, double default_slo) {
  job_spec_result result;
  if (auto text = read_text_file(path, result.errors))
    return parse_job_spec(*text, path, default_slo);
  return result;
}

std::string job_record(const rl_job& job, int state, const std::string& group,
                       const std::string& reason) {
  v1::Job r;
  r.set_id(job.id);
  r.set_name(job.name);
  r.set_model(job.model);
  r.set_rollout_gpus(uint32_t(job.rollout_gpus));
  r.set_training_gpus(uint32_t(job.training_gpus));
  r.set_max_response_tokens(uint32_t(job.max_response_tokens));
  r.set_batch_size(uint32_t(job.batch_size));
  r.set_multi_turn(job.multi_turn);
  r.set_rollout_host_memory_gb(job.rollout_memory_gb);
  r.set_training_host_memory_gb(job.training_memory_gb);
  r.set_slo(job.slo);
  r.set_worst_rollout_s(job.rollout_s);
  r.set_worst_training_s(job.training_s);
  r.set_model_bytes(uint64_t(job.model_gb * 1e9));
  r.set_state(v1::JobState(state));
  r.set_group_id(group);
  r.set_reason(reason);
  r.set_iterations(uint64_t(job.iterations));
  r.set_sync_s(job.sync_s);
  return r.SerializeAsString();
}

std::optional<rl_job> job_from_record(std::string_view bytes) {
  v1::Job r;
  if (!r.ParseFromArray(bytes.data(), int(bytes.size())))
    return std::nullopt;
  rl_job j;
  j.id = r.id();
  j.name = r.name();
  j.model = r.model();
  j.rollout_gpus = int(r.rollout_gpus());
  j.training_gpus = int(r.training_gpus());
  j.max_response_tokens = int(r.max_response_tokens());
  j.batch_size = int(r.batch_size());
  j.multi_turn = r.multi_turn();
  j.rollout_memory_gb = r.rollout_host_memory_gb();
  j.training_memory_gb = r.training_host_memory_gb();
  j.slo = r.slo();
  j.rollout_s = r.worst_rollout_s();
  j.training_s = r.worst_training_s();
  j.model_gb = double(r.model_bytes()) / 1e9;
  j.iterations = int64_t(r.iterations());
  j.sync_s = r.sync_s();
  return j;
}

} // namespace loom
