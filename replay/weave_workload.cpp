#include "replay/weave_workload.hpp"

#include <cmath>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/toml_reader.hpp"
#include "scheduler/job_spec.hpp"

namespace loom::replay {

namespace {

struct range {
  double lo, hi;
};

// WEAVE Table 6: (T_roll, T_train) ranges per profile and size.
struct table6_row {
  table6_profile profile;
  const char* name;
  range roll[3];
  range train[3];
};

constexpr table6_row table6[] = {
  {table6_profile::balanced, "BL", {{50, 100}, {100, 200}, {200, 300}},
   {{50, 100}, {100, 200}, {200, 300}}},
  {table6_profile::rollout_heavy, "RH", {{100, 200}, {200, 400}, {400, 600}},
   {{25, 50}, {50, 100}, {100, 200}}},
  {table6_profile::train_heavy, "TH", {{25, 50}, {50, 100}, {100, 200}},
   {{100, 200}, {200, 400}, {400, 600}}},
};

// Sizes: Qwen-2.5 7B / 14B / 32B (WEAVE Table 3 GPU counts, Table 2 per-node footprints).
struct size_row {
  const char* name;
  const char* model;
  int gpus;
  double rollout_gb, training_gb, model_gb;
};

constexpr size_row sizes[] = {
  {"small", "Qwen2.5-7B", 8, 275.7, 240.0, 15.2},
  {"medium", "Qwen2.5-14B", 8, 445.4, 456.1, 29.5},
  {"large", "Qwen2.5-32B", 16, 490.3, 520.4, 65.5},
};

int size_index(const std::string& s) {
  for (int i = 0; i < 3; ++i)
    if (s == sizes[i].name)
      return i;
  return 0;
}

/// The Table 6 row a uniform draw picks under the mix weights.
size_t mixed_row(const workload_generator& g, double u) {
  const double total = g.mix[0] + g.mix[1] + g.mix[2];
  double acc = 0;
  for (size_t i = 0; i < 2; ++i) {
    acc += g.mix[i] / total;
    if (u < acc)
      return i;
  }
  return 2;
}

} // namespace

std::vector<job_arrival> generate_workload(const workload_generator& g, uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<double> unit{0.0, 1.0};
  std::exponential_distribution<double> gap{double(g.jobs) / (g.span_h * 3600)};
  // Log-normal with the requested mean: mu = ln(mean) - sigma^2 / 2.
  std::lognormal_distribution<double> life{
    std::log(g.lifetime_mean_h * 3600) - g.lifetime_sigma * g.lifetime_sigma / 2,
    g.lifetime_sigma};
  std::vector<job_arrival> out;
  double t = 0;
  for (int i = 0; i < g.jobs; ++i) {
    t += gap(rng);
    const auto& row = g.profile == table6_profile::mixed ? table6[mixed_row(g, unit(rng))]
                                                         : table6[size_t(g.profile)];
    const int s = size_index(g.sizes[size_t(unit(rng) * double(g.sizes.size())) % g.sizes.size()]);
    const auto& sz = sizes[s];
    auto draw = [&](range r) { return r.lo + (r.hi - r.lo) * unit(rng); };
    job_arrival a;
    a.profile = fmt::format("{}-{}", row.name, sz.name);
    a.arrival_s = t;
    auto& j = a.job;
    j.id = j.name = fmt::format("job-{:04d}", i);
    j.model = sz.model;
    j.rollout_gpus = j.training_gpus = sz.gpus;
    j.rollout_memory_gb = sz.rollout_gb;
    j.training_memory_gb = sz.training_gb;
    j.model_gb = sz.model_gb;
    j.batch_size = 256;
    j.max_response_tokens = 8192;
    j.rollout_s = draw(row.roll[s]);
    j.training_s = draw(row.train[s]);
    j.slo = g.slo_min + (g.slo_max - g.slo_min) * unit(rng);
    const double lifetime = std::min(life(rng), g.lifetime_max_h * 3600);
    // Iterations: the lifetime over its worst-case rollout + training (sync left out).
    j.iterations = std::max<int64_t>(1, std::llround(lifetime / (j.rollout_s + j.training_s)));
    static constexpr double slopes[] = {0, 0.25, 0.5, 0.75};
    const double slope = slopes[size_t(unit(rng) * 4) % 4];
    switch (g.drift) {
      case drift_mode::none: break;
      case drift_mode::increasing: a.drift.slope = slope; break;
      case drift_mode::decreasing: a.drift.slope = -slope / 2; break;
      case drift_mode::mixed: a.drift.slope = unit(rng) < 0.5 ? slope : -slope / 2; break;
    }
    if (unit(rng) < g.failure_probability) {
      a.fail_after_s = lifetime * (0.1 + 0.8 * unit(rng));
      a.recovery_s = g.recovery_h * 3600;
    }
    out.push_back(std::move(a));
  }
  return out;
}

namespace {

/// The job-spec keys of a trace line as a TOML table, for the same reader `loom submit` uses.
toml::table spec_table(const nlohmann::json& doc, const std::string& where,
                       std::vector<config_error>& errors) {
  toml::table spec;
  for (auto& [key, value] : doc.items()) {
    if (value.is_string())
      spec.insert(key, value.get<std::string>());
    else if (value.is_boolean())
      spec.insert(key, value.get<bool>());
    else if (value.is_number_integer())
      spec.insert(key, value.get<int64_t>());
    else if (value.is_number())
      spec.insert(key, value.get<double>());
    else
      errors.push_back(config_error{where, 0, 0, key, "must be a string, number or boolean"});
  }
  return spec;
}

/// One JSONL line: its arrival, lifetime, drift and failure keys, the rest a job spec.
std::optional<job_arrival> read_trace_line(nlohmann::json doc, const std::string& where,
                                           std::vector<config_error>& errors) {
  job_arrival a;
  a.profile = "trace";
  auto number_of = [&](const char* key, double fallback, bool required) -> double {
    auto it = doc.find(key);
    if (it == doc.end()) {
      if (required)
        errors.push_back(config_error{where, 0, 0, key, "missing"});
      return fallback;
    }
    double v = it->is_number() ? it->get<double>() : -1;
    if (!it->is_number() || v < 0)
      errors.push_back(config_error{where, 0, 0, key, "must be a non-negative number"});
    doc.erase(it);
    return v;
  };
  a.arrival_s = number_of("arrival_h", 0, true) * 3600;
  const bool has_iterations = doc.contains("iterations");
  const double lifetime_s = number_of("lifetime_h", 0, !has_iterations) * 3600;
  a.drift.slope = doc.contains("drift_slope") && doc["drift_slope"].is_number()
                    ? doc["drift_slope"].get<double>()
                    : 0.0;
  doc.erase("drift_slope");
  a.fail_after_s = number_of("fail_after_h", -1.0 / 3600, false) * 3600;
  a.recovery_s = number_of("recovery_h", 0, false) * 3600;
  auto spec = spec_table(doc, where, errors);
  config_diagnostics diag{where};
  table_reader reader{spec, "", diag};
  auto job = read_job_spec(reader, 1.5);
  for (auto& e : diag.take_errors())
    errors.push_back(std::move(e));
  if (!job)
    return std::nullopt;
  a.job = std::move(*job);
  if (!has_iterations)
    a.job.iterations =
      std::max<int64_t>(1, std::llround(lifetime_s / (a.job.rollout_s + a.job.training_s)));
  return a;
}

} // namespace

std::optional<std::vector<job_arrival>> load_trace(const std::string& path,
                                                   std::vector<config_error>& errors) {
  std::ifstream in{path};
  if (!in) {
    errors.push_back(config_error{path, 0, 0, "", "cannot open file"});
    return std::nullopt;
  }
  std::vector<job_arrival> out;
  std::string line;
  const size_t before = errors.size();
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    const std::string where = fmt::format("{}:{}", path, number);
    auto doc = nlohmann::json::parse(line, nullptr, false);
    if (doc.is_discarded() || !doc.is_object()) {
      errors.push_back(config_error{where, 0, 0, "", "not a JSON object"});
      continue;
    }
    if (auto a = read_trace_line(std::move(doc), where, errors))
      out.push_back(std::move(*a));
  }
  if (errors.size() > before)
    return std::nullopt;
  std::stable_sort(out.begin(), out.end(),
                   [](auto& x, auto& y) { return x.arrival_s < y.arrival_s; });
  return out;
}

} // namespace loom::replay
