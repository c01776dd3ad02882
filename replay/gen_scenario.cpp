#include "replay/gen_scenario.hpp"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "config/profile_file.hpp"
#include "config/toml_reader.hpp"
#include "replay/gen_workload.hpp"

namespace loom::replay {

const std::vector<std::string>& gen_policy_names() {
  static const std::vector<std::string> names{"static-best", "static-tp8", "planner-only",
                                              "balancer-only", "orchestr"};
  return names;
}

namespace {

void read_head(table_reader& head, gen_scenario& sc) {
  if (auto v = head.required<std::string>("name"))
    sc.name = *v;
  if (auto v = head.required<std::string>("kind"); v && *v != "generation")
    head.error("kind", fmt::format("'{}' is not \"generation\"", *v));
  read_seeds(head, sc.seed, sc.seeds);
  if (auto v = head.required<std::vector<std::string>>("policies")) {
    auto& names = gen_policy_names();
    for (auto& p : *v)
      if (std::find(names.begin(), names.end(), p) == names.end())
        head.error("policies", fmt::format("'{}' is not one of: static-best, static-tp8, "
                                           "planner-only, balancer-only, orchestr", p));
    if (v->empty())
      head.error("policies", "lists no policy: name at least one of static-best, static-tp8, "
                             "planner-only, balancer-only, orchestr");
    for (auto& n : names) // report order is fixed
      if (std::find(v->begin(), v->end(), n) != v->end())
        sc.policies.push_back(n);
  }
  head.reject_unknown();
}

void read_profile(table_reader& d, gen_scenario& sc, const std::string& dir,
                  std::vector<config_error>& errors) {
  auto name = d.optional<std::string>("profile", "");
  if (!name || name->empty())
    return;
  auto path = scenario_input(d, "profile", dir, *name);
  if (!path)
    return;
  auto profile = read_engine_profile(*path, errors);
  if (!profile)
    return;
  if (auto why = profile_mismatch(*profile, sc.model.name, sc.gpu.name)) {
    d.error("profile", fmt::format("'{}' {}", *name, *why));
    return;
  }
  sc.profile = std::make_shared<const engine_profile>(std::move(*profile));
  sc.profile_name = *name;
  sc.profile_path = *path;
}

void read_deployment(table_reader& d, gen_scenario& sc, const std::string& dir,
                     std::vector<config_error>& errors) {
  if (auto v = d.required<std::string>("model")) {
    if (auto m = find_model(*v))
      sc.model = *m;
    else
      d.error("model", fmt::format("'{}' is not a model the engine model knows (OrchestrRL "
                                   "Table 3)", *v));
  }
  if (auto v = d.optional<std::string>("gpu", "H800")) {
    if (auto g = find_builtin_gpu(*v))
      sc.gpu = *g;
    else
      d.error("gpu", fmt::format("'{}' is not a known GPU", *v));
  }
  if (auto v = at_least<int64_t>(d, "gpus", d.required<int64_t>("gpus"), 1))
    sc.gpus = int(*v);
  if (auto v = at_least<int64_t>(d, "gpus_per_node",
                                 d.optional<int64_t>("gpus_per_node", sc.planner.gpus_per_node),
                                 1))
    sc.planner.gpus_per_node = int(*v);
  if (auto v = fraction(d, "memory_utilization",
                        d.optional<double>("memory_utilization", sc.memory_utilization)))
    sc.memory_utilization = *v;
  positive_into(d, "step_timeout_s", sc.step_timeout_s);
  read_profile(d, sc, dir, errors);
  d.reject_unknown();
}

void read_workload(table_reader& w, gen_scenario& sc, const std::string& dir,
                   std::vector<config_error>& errors) {
  gen_length_generator g;
  if (auto v = at_least<int64_t>(w, "steps", w.optional<int64_t>("steps", g.steps), 1))
    g.steps = int(*v);
  if (auto v = at_least<int64_t>(w, "batch", w.optional<int64_t>("batch", g.batch), 1))
    g.batch = int(*v);
  if (auto v = at_least<int64_t>(w, "max_tokens", w.required<int64_t>("max_tokens"), 2))
    g.max_tokens = *v;
  sc.max_tokens = g.max_tokens;
  if (auto v = non_negative(w, "training_s", w.optional<double>("training_s", sc.training_s)))
    sc.training_s = *v;
  if (auto v = within<int64_t>(w, "off_policy_steps",
                               w.optional<int64_t>("off_policy_steps", sc.off_policy_steps), 0, 1))
    sc.off_policy_steps = int(*v);
  if (auto v = at_least<int64_t>(w, "curve_step", w.optional<int64_t>("curve_step", g.steps - 1),
                                 0)) {
    if (*v >= g.steps)
      w.error("curve_step", fmt::format("must be below steps ({})", g.steps));
    sc.curve_step = size_t(*v);
  }
  if (auto v = one_of<dispatch_mode>(w, "dispatch",
                                     w.optional<std::string>("dispatch",
                                                             std::string{to_string(sc.dispatch)})))
    sc.dispatch = *v;
  if (auto trace = w.optional<std::string>("trace", ""); trace && !trace->empty()) {
    auto path = scenario_input(w, "trace", dir, *trace);
    gen_trace_options o{path.value_or(""), g.steps, g.batch, g.max_tokens};
    positive_into(w, "output_scale", o.output_scale);
    positive_into(w, "prompt_scale", o.prompt_scale);
    w.reject_unknown();
    if (auto steps = path ? load_gen_trace(o, errors) : std::nullopt)
      sc.steps = std::move(*steps);
    sc.workload_source = fmt::format("trace {}: consecutive rows, prompts x {}, outputs x {} "
                                     "capped at {} tokens", *trace, o.prompt_scale,
                                     o.output_scale, g.max_tokens);
    return;
  }
  if (auto v = at_least<int64_t>(w, "prompt_min", w.optional<int64_t>("prompt_min", g.prompt_min),
                                 1))
    g.prompt_min = *v;
  if (auto v = at_least<int64_t>(w, "prompt_max", w.optional<int64_t>("prompt_max", g.prompt_max),
                                 g.prompt_min))
    g.prompt_max = *v;
  positive_into(w, "median_tokens", g.median_tokens);
  positive_into(w, "sigma", g.sigma);
  if (auto v = non_negative(w, "drift_per_step",
                            w.optional<double>("drift_per_step", g.drift_per_step)))
    g.drift_per_step = *v;
  if (auto v = at_least<int64_t>(w, "group_size", w.optional<int64_t>("group_size", g.group_size),
                                 1))
    g.group_size = int(*v);
  if (auto v = non_negative(w, "group_correlation",
                            w.optional<double>("group_correlation", g.group_correlation))) {
    if (*v > 1)
      w.error("group_correlation", fmt::format("must be at most 1, got {}", *v));
    else
      g.group_correlation = *v;
  }
  w.reject_unknown();
  sc.steps = generate_gen_workload(g, sc.seed);
  sc.generator = g;
  sc.workload_source = fmt::format("generator: {} steps x {} requests, prompts {}-{} tokens, "
                                   "outputs log-normal (median {} tokens, sigma {}, +{}% per "
                                   "step) capped at {}", g.steps, g.batch, g.prompt_min,
                                   g.prompt_max, g.median_tokens, g.sigma,
                                   g.drift_per_step * 100, g.max_tokens)
                       + (g.group_size > 1
                            ? fmt::format(", in prompt groups of {} sharing {} of the log-length "
                                          "variance", g.group_size, g.group_correlation)
                            : "");
}

/// Every table of the scenario file; top-level unknown keys are the caller's.
void read_gen_scenario(table_reader& root, gen_scenario& sc, const std::string& dir,
                       std::vector<config_error>& errors) {
  if (auto head = root.required_table("scenario"))
    read_head(*head, sc);
  if (auto d = root.required_table("deployment"))
    read_deployment(*d, sc, dir, errors);
  if (auto p = root.table("planner")) {
    positive_into(*p, "interval_s", sc.plan_interval_s);
    if (auto v = non_negative(*p, "epsilon_s", p->optional<double>("epsilon_s",
                                                                    sc.planner.epsilon_s)))
      sc.planner.epsilon_s = *v;
    if (auto v = at_least<int64_t>(*p, "bin_tokens", p->optional<int64_t>("bin_tokens",
                                                                           sc.bin_tokens), 1))
      sc.bin_tokens = int(*v);
    if (auto v = at_least<int64_t>(*p, "forecast_window",
                                   p->optional<int64_t>("forecast_window",
                                                        int64_t(sc.forecast_window)), 4))
      sc.forecast_window = size_t(*v);
    positive_into(*p, "kv_balance_delta", sc.planner.kv_balance_delta);
    positive_into(*p, "weight_load_gbps", sc.planner.weight_load_gbps);
    if (auto v = non_negative(*p, "engine_restart_s",
                              p->optional<double>("engine_restart_s",
                                                  sc.planner.engine_restart_s)))
      sc.planner.engine_restart_s = *v;
    if (auto v = non_negative(*p, "standby_restart_s",
                              p->optional<double>("standby_restart_s",
                                                  sc.planner.standby_restart_s)))
      sc.planner.standby_restart_s = *v;
    p->reject_unknown();
  }
  if (auto b = root.table("balancer")) {
    positive_into(*b, "tick_s", sc.tick_s);
    if (auto v = non_negative(*b, "theta", b->optional<double>("theta", sc.balancer.theta)))
      sc.balancer.theta = *v;
    b->reject_unknown();
  }
  if (auto k = root.table("kv")) {
    positive_into(*k, "nic_gbps", sc.planner.kv_path.nic_gbps);
    if (auto v = at_least<int64_t>(*k, "nics", k->optional<int64_t>("nics",
                                                                     sc.planner.kv_path.nics), 1))
      sc.planner.kv_path.nics = int(*v);
    k->reject_unknown();
  }
  if (auto w = root.required_table("workload"))
    read_workload(*w, sc, dir, errors);
  if (auto p = root.table("paper")) {
    gen_scenario::paper_figure f;
    positive_into(*p, "orchestr_vs_static_best", f.orchestr_vs_static_best);
    if (auto v = p->required<std::string>("source"))
      f.source = *v;
    p->reject_unknown();
    sc.paper = f;
  }
}

} // namespace

scenario_result<gen_scenario> load_gen_scenario(const std::string& path) {
  return load_scenario_file<gen_scenario>(path, read_gen_scenario);
}

gen_scenario with_seed(const gen_scenario& sc, uint64_t seed) {
  gen_scenario out = sc;
  out.seed = seed;
  out.seeds = {seed};
  if (sc.generator)
    out.steps = generate_gen_workload(*sc.generator, seed);
  return out;
}

engine_model engine_of(const gen_scenario& sc) {
  return engine_model{sc.model, sc.gpu, engine_params_of(deployment_for(sc, 1, true, true)),
                      sc.profile};
}

int engine_gpus(const gen_scenario& sc) {
  return std::min(sc.gpus, sc.planner.gpus_per_node);
}

deployment_config deployment_for(const gen_scenario& sc, const parallel_config& initial,
                                 bool planner, bool balancer) {
  deployment_config d;
  d.name = sc.name;
  d.model = sc.model.name;
  d.gpu = sc.gpu.name;
  d.gpus = sc.gpus;
  d.profile_path = sc.profile_path;
  d.profile = sc.profile;
  d.memory_utilization = sc.memory_utilization;
  d.step_timeout_s = sc.step_timeout_s;
  d.initial = initial;
  d.max_tokens = sc.max_tokens;
  d.planner_enabled = planner;
  d.balancer_enabled = balancer;
  d.dispatch = sc.dispatch;
  d.period_s = sc.plan_interval_s;
  d.tick_s = sc.tick_s;
  d.bin_tokens = sc.bin_tokens;
  d.forecast_window = sc.forecast_window;
  d.planner = sc.planner;
  d.planner.gpus_per_node = engine_gpus(sc);
  d.balancer = sc.balancer;
  return d;
}

sim_generation_config framework_for(const gen_scenario& sc, const parallel_config& loaded) {
  sim_generation_config f;
  f.deployment = sc.name;
  f.gpus_per_engine = engine_gpus(sc);
  f.engines = sc.gpus / f.gpus_per_engine;
  f.loaded = loaded;
  f.steps = sc.steps;
  f.tick_s = sc.tick_s;
  f.training_s = sc.training_s;
  f.off_policy_steps = sc.off_policy_steps;
  f.costs = engine_sim_costs_of(sc.planner);
  f.curve_step = sc.curve_step;
  return f;
}

} // namespace loom::replay
