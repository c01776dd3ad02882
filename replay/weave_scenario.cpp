#include "replay/weave_scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/toml_reader.hpp"

namespace loom::replay {

const std::vector<std::string>& weave_policy_names() {
  static const std::vector<std::string> names{"weave",      "weave-paper", "solo-d",
                                              "colocated",  "random",      "greedy",
                                              "random-slo", "greedy-slo",  "optimal",
                                              "bound"};
  return names;
}

namespace {

/// The Table 6 generator's keys.
workload_generator read_generator(table_reader& w) {
  workload_generator g;
  if (auto p = one_of<table6_profile>(w, "profile", w.optional<std::string>("profile", "mixed")))
    g.profile = *p;
  if (auto mix = w.table("mix")) {
    const char* keys[] = {"bl", "rh", "th"};
    for (size_t i = 0; i < 3; ++i)
      if (auto v = non_negative(*mix, keys[i], mix->optional<double>(keys[i], g.mix[i])))
        g.mix[i] = *v;
    if (g.mix[0] + g.mix[1] + g.mix[2] <= 0)
      mix->error("bl", "the weights of bl, rh and th must not all be zero");
    mix->reject_unknown();
  }
  if (auto v = w.optional<std::vector<std::string>>("sizes", g.sizes)) {
    bool ok = !v->empty();
    for (auto& s : *v)
      ok &= s == "small" || s == "medium" || s == "large";
    if (ok)
      g.sizes = *v;
    else
      w.error("sizes", "must list some of: small, medium, large");
  }
  if (auto v = at_least<int64_t>(w, "jobs", w.optional<int64_t>("jobs", g.jobs), 1))
    g.jobs = int(*v);
  for (auto [key, field] : {std::pair{"span_h", &workload_generator::span_h},
                            std::pair{"lifetime_mean_h", &workload_generator::lifetime_mean_h},
                            std::pair{"lifetime_sigma", &workload_generator::lifetime_sigma},
                            std::pair{"lifetime_max_h", &workload_generator::lifetime_max_h},
                            std::pair{"recovery_h", &workload_generator::recovery_h}})
    if (auto v = positive(w, key, w.optional<double>(key, g.*field)))
      g.*field = *v;
  if (auto v = at_least<double>(w, "slo_min", w.optional<double>("slo_min", g.slo_min), 1.0))
    g.slo_min = *v;
  if (auto v = at_least<double>(w, "slo_max", w.optional<double>("slo_max", g.slo_max), g.slo_min))
    g.slo_max = *v;
  if (auto v = non_negative(w, "failure_probability",
                            w.optional<double>("failure_probability", g.failure_probability)))
    g.failure_probability = std::min(1.0, *v);
  if (auto d = one_of<drift_mode>(w, "drift", w.optional<std::string>("drift", "none")))
    g.drift = *d;
  return g;
}

/// Every arrival submitted to be profiled, when the scenario says so (a trace's line may also
/// say so for its own job).
void mark_profiled(weave_scenario& sc) {
  if (sc.profiled)
    for (auto& a : sc.jobs)
      a.job.profile = true;
}

/// Response lengths, then a trace file or the generator.
void read_workload(table_reader& w, weave_scenario& sc, const std::string& dir,
                   std::vector<config_error>& errors) {
  if (auto v = positive(w, "median_length_fraction",
                        w.optional<double>("median_length_fraction", sc.lengths.median_fraction)))
    sc.lengths.median_fraction = std::min(1.0, *v);
  if (auto v = positive(w, "length_sigma", w.optional<double>("length_sigma", sc.lengths.sigma)))
    sc.lengths.sigma = *v;
  if (auto v = at_least<int64_t>(w, "batch", w.optional<int64_t>("batch", sc.lengths.batch), 1))
    sc.lengths.batch = int(*v);
  if (auto v = w.optional<bool>("profiled", false))
    sc.profiled = *v;
  if (auto trace = w.optional<std::string>("trace", ""); trace && !trace->empty()) {
    auto path = scenario_input(w, "trace", dir, *trace);
    sc.workload_source = *trace;
    if (auto jobs = path ? load_trace(*path, errors) : std::nullopt)
      sc.jobs = std::move(*jobs);
    w.reject_unknown();
    mark_profiled(sc);
    return;
  }
  auto g = read_generator(w);
  w.reject_unknown();
  sc.jobs = generate_workload(g, sc.seed);
  mark_profiled(sc);
  sc.generator = g;
  sc.workload_source = fmt::format("WEAVE Table 6 generator: {} jobs over {} h", g.jobs, g.span_h);
}

/// Every table of the scenario file; top-level unknown keys are the caller's.
void read_weave_scenario(table_reader& root, weave_scenario& sc, const std::string& dir,
                         std::vector<config_error>& errors) {
  auto head = root.required_table("scenario");
  std::string cluster_path;
  if (head) {
    if (auto v = head->required<std::string>("name"))
      sc.name = *v;
    if (auto v = head->required<std::string>("kind"); v && *v != "weave")
      head->error("kind", fmt::format("'{}' is not a scenario kind this build replays (weave)", *v));
    read_seeds(*head, sc.seed, sc.seeds);
    if (auto v = head->optional<std::string>("cluster", ""); v && !v->empty())
      cluster_path = scenario_input(*head, "cluster", dir, *v).value_or("");
    if (auto v = head->required<std::vector<std::string>>("policies")) {
      for (auto& p : *v) {
        auto& names = weave_policy_names();
        if (std::find(names.begin(), names.end(), p) == names.end())
          head->error("policies", fmt::format("'{}' is not one of: {}", p,
                                              fmt::join(names, ", ")));
      }
      if (v->empty())
        head->error("policies", fmt::format("lists no policy: name at least one of {}",
                                            fmt::join(weave_policy_names(), ", ")));
      // Report order is fixed, whatever order the file lists them in.
      for (auto& n : weave_policy_names())
        if (std::find(v->begin(), v->end(), n) != v->end())
          sc.policies.push_back(n);
    }
    head->reject_unknown();
  }
  // The cluster first: the scenario's [policy] overrides its WEAVE knobs.
  auto cfg = cluster_path.empty()
               ? parse_config(embedded_config_text(), "<embedded conf/loom.toml>")
               : load_config_file(cluster_path);
  for (auto& e : cfg.errors)
    errors.push_back(e);
  if (cfg.value)
    sc.config = std::move(*cfg.value);
  auto& weave = sc.config.policy.weave;
  if (auto p = root.table("policy")) {
    if (auto v = at_least<int64_t>(*p, "max_group_size",
                                   p->optional<int64_t>("max_group_size", weave.max_group_size), 1))
      weave.max_group_size = int(*v);
    if (auto v = one_of<slo_bound>(*p, "admission_bound",
                                   p->optional<std::string>(
                                     "admission_bound", std::string{to_string(weave.admission_bound)})))
      weave.admission_bound = *v;
    if (auto v = p->optional<bool>("tail_migration", true))
      sc.migrate_tails = *v;
    if (auto v = fraction(*p, "tail_migration_threshold",
                          p->optional<double>("tail_migration_threshold",
                                              weave.tail_migration_threshold)))
      weave.tail_migration_threshold = *v;
    if (auto v = p->optional<bool>("topology_aware_sync", weave.topology_aware_sync))
      weave.topology_aware_sync = *v;
    if (auto v = non_negative(*p, "drift_margin", p->optional<double>("drift_margin",
                                                                      weave.drift_margin)))
      weave.drift_margin = *v;
    if (auto v = p->optional<bool>("consolidate", weave.consolidate))
      weave.consolidate = *v;
    p->reject_unknown();
  }
  if (auto w = root.required_table("workload"))
    read_workload(*w, sc, dir, errors);
}

} // namespace

weave_scenario with_seed(const weave_scenario& sc, uint64_t seed) {
  weave_scenario out = sc;
  out.seed = seed;
  out.seeds = {seed};
  if (sc.generator) {
    out.jobs = generate_workload(*sc.generator, seed);
    mark_profiled(out);
  }
  return out;
}

std::shared_ptr<length_draws> length_draws_of(const weave_scenario& sc) {
  return std::make_shared<length_draws>(sc.lengths, sc.config.policy.weave.tail_migration_threshold,
                                        sc.seed);
}

scenario_result<weave_scenario> load_weave_scenario(const std::string& path) {
  return load_scenario_file<weave_scenario>(path, read_weave_scenario);
}

} // namespace loom::replay
