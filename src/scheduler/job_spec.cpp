#include "scheduler/job_spec.hpp"

#include <fmt/format.h>

#include "config/toml_reader.hpp"

namespace loom {

namespace {

/// Host-memory footprints and worst-case phases: written by hand, or (profile = true)
/// measured by WEAVE's one-shot profiling pass, §5 (1)(2). A profiled job may name
/// footprints its workers do not report; its phase times are only ever measured.
void read_worst_cases(table_reader& t, rl_job& j, bool& ok) {
  auto take = [&](std::optional<double> v, double& out) {
    if (v)
      out = *v;
    else
      ok = false;
  };
  auto memory = [&](std::string_view key, double& out) {
    take(non_negative(t, key, j.profile ? t.optional<double>(key, 0.0) : t.required<double>(key)),
         out);
  };
  memory("rollout_host_memory_gb", j.rollout_memory_gb);
  memory("training_host_memory_gb", j.training_memory_gb);
  for (auto [key, out] : {std::pair{"worst_rollout_s", &j.rollout_s},
                          std::pair{"worst_training_s", &j.training_s}}) {
    if (!j.profile) {
      take(positive(t, key, t.required<double>(key)), *out);
    } else if (t.optional<double>(key, -1.0) != -1.0) {
      t.error(key, "is measured by the job's profiling pass (profile = true): remove one");
      ok = false;
    }
  }
}

} // namespace

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
  take(t.optional<bool>("profile", false), j.profile);
  read_worst_cases(t, j, ok);
  take(at_least<double>(t, "slo", t.optional<double>("slo", default_slo), 1.0), j.slo);
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

std::string format_job_spec(const rl_job& j) {
  // {} prints the shortest text that reads back to the same double.
  auto text = fmt::format(R"(name = "{}"
model = "{}"
rollout_gpus = {}
training_gpus = {}
max_response_tokens = {}
batch_size = {}
multi_turn = {}
rollout_host_memory_gb = {}
training_host_memory_gb = {}
slo = {}
model_gb = {}
iterations = {}
)",
                          j.id, j.model, j.rollout_gpus, j.training_gpus, j.max_response_tokens,
                          j.batch_size, j.multi_turn, j.rollout_memory_gb, j.training_memory_gb,
                          j.slo, j.model_gb, j.iterations);
  if (j.profile)
    return text + "profile = true\n";
  return text + fmt::format("worst_rollout_s = {}\nworst_training_s = {}\n", j.rollout_s,
                            j.training_s);
}

} // namespace loom
