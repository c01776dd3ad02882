// The [generation] section of a config: the generation deployments `loom serve` orchestrates
// (OrchestrRL §4), each checked where it is written. [policy.planner] and [policy.balancer]
// give the defaults of every deployment's planner and balancer knobs.

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "config/config_parts.hpp"
#include "config/profile_file.hpp"
#include "generation/engine_model.hpp"
#include "generation/model_catalog.hpp"

namespace loom::config_parts {

namespace {

bool valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

/// An integer in [min, max], reported at its key otherwise.
template <class Out>
void bounded_into(table_reader& d, std::string_view key, Out& field, int64_t min, int64_t max) {
  auto v = at_least<int64_t>(d, key, d.optional<int64_t>(key, int64_t(field)), min);
  if (v && *v > max)
    d.error(key, fmt::format("must be at most {}, got {}", max, *v));
  else if (v)
    field = Out(*v);
}

void read_identity(table_reader& d, const config& cfg, deployment_config& out) {
  if (auto v = d.required<std::string>("model")) {
    if (find_model(*v)) {
      out.model = *v;
    } else {
      std::string known;
      for (auto& m : builtin_models())
        known += (known.empty() ? "" : ", ") + m.name;
      d.error("model", fmt::format("'{}' is not a model the engine model knows ({})", *v, known));
    }
  }
  if (auto v = d.required<std::string>("gpu")) {
    if (cfg.cluster.find_gpu(*v))
      out.gpu = *v;
    else
      d.error("gpu", fmt::format("unknown GPU type '{}' (add [cluster.gpus.{}])", *v, *v));
  }
  bounded_into(d, "gpus", out.gpus, 1, 65536);
  if (auto v = fraction(d, "memory_utilization",
                        d.optional<double>("memory_utilization", out.memory_utilization)))
    out.memory_utilization = *v;
  bounded_into(d, "gpus_per_node", out.planner.gpus_per_node, 1, 64);
  if (out.gpus % out.planner.gpus_per_node != 0)
    d.error("gpus", fmt::format("must be a whole number of engines of gpus_per_node = {} GPUs, "
                                "got {}",
                                out.planner.gpus_per_node, out.gpus));
}

/// The deployment's engine profile, if it names one: readable, and of its model and GPU.
void read_profile(table_reader& d, const std::string& config_dir, deployment_config& out) {
  auto name = d.optional<std::string>("profile", "");
  if (!name || name->empty())
    return;
  const auto path = resolve_path(config_dir, *name);
  std::vector<config_error> errors;
  auto profile = read_engine_profile(path, errors);
  for (auto& e : errors)
    d.error("profile", e.to_string());
  if (!profile)
    return;
  if (auto why = profile_mismatch(*profile, out.model, out.gpu)) {
    d.error("profile", fmt::format("'{}' {}", *name, *why));
    return;
  }
  out.profile_path = path;
  out.profile = std::make_shared<const engine_profile>(std::move(*profile));
}

/// The initial parallel config: a name, laid out in whole engines or within one, that fits.
void read_initial(table_reader& d, const config& cfg, deployment_config& out) {
  auto text = d.required<std::string>("initial");
  if (!text)
    return;
  auto c = parallel_config::parse(*text);
  if (!c) {
    d.error("initial", fmt::format("'{}' is not a parallel config (TP<n>, EP<n>/TP<m>, "
                                   "AFD<attention>:<ffn>)",
                                   *text));
    return;
  }
  const int g = c->gpus();
  const int node = out.planner.gpus_per_node;
  if (out.gpus % g != 0 || (g < node ? node % g != 0 : g % node != 0)) {
    d.error("initial", fmt::format("{} takes {} GPUs: it must divide the deployment's {} and "
                                   "either divide or be a multiple of gpus_per_node = {}",
                                   *text, g, out.gpus, node));
    return;
  }
  auto model = find_model(out.model);
  auto* gpu = cfg.cluster.find_gpu(out.gpu);
  if (model && gpu
      && engine_model{*model, *gpu, engine_params_of(out), out.profile}.kv_capacity_tokens(*c)
           <= 0) {
    d.error("initial", fmt::format("{}'s weights do not fit {} on {} GPUs", out.model, *text,
                                   out.gpu));
    return;
  }
  out.initial = *c;
}

void read_planner_knobs(table_reader& d, deployment_config& out) {
  if (auto v = d.optional<bool>("planner", out.planner_enabled))
    out.planner_enabled = *v;
  if (auto v = d.optional<bool>("balancer", out.balancer_enabled))
    out.balancer_enabled = *v;
  if (auto v = one_of<dispatch_mode>(d, "dispatch",
                                     d.optional<std::string>("dispatch",
                                                             std::string{to_string(out.dispatch)})))
    out.dispatch = *v;
  positive_into(d, "period_s", out.period_s);
  double tick_ms = out.tick_s * 1e3;
  positive_into(d, "tick_ms", tick_ms);
  out.tick_s = tick_ms / 1e3;
  bounded_into(d, "max_tokens", out.max_tokens, 2, 1 << 24);
  bounded_into(d, "histogram_bin_tokens", out.bin_tokens, 1, 1 << 20);
  bounded_into(d, "forecast_window", out.forecast_window, 4, 4096);
  if (auto v = non_negative(d, "epsilon_s", d.optional<double>("epsilon_s",
                                                               out.planner.epsilon_s)))
    out.planner.epsilon_s = *v;
  if (auto v = non_negative(d, "theta", d.optional<double>("theta", out.balancer.theta)))
    out.balancer.theta = *v;
  positive_into(d, "kv_balance_delta", out.planner.kv_balance_delta);
  positive_into(d, "weight_load_gbps", out.planner.weight_load_gbps);
  if (auto v = non_negative(d, "engine_restart_s",
                            d.optional<double>("engine_restart_s", out.planner.engine_restart_s)))
    out.planner.engine_restart_s = *v;
  if (auto v = non_negative(d, "standby_restart_s",
                            d.optional<double>("standby_restart_s", out.planner.standby_restart_s)))
    out.planner.standby_restart_s = *v;
  positive_into(d, "kv_nic_gbps", out.planner.kv_path.nic_gbps);
  bounded_into(d, "kv_nics", out.planner.kv_path.nics, 1, 64);
}

void read_command_knobs(table_reader& d, deployment_config& out) {
  positive_into(d, "command_timeout_s", out.command_timeout_s);
  positive_into(d, "reshard_timeout_s", out.reshard_timeout_s);
  bounded_into(d, "command_retries", out.command_retries, 0, 10);
  positive_into(d, "step_timeout_s", out.step_timeout_s);
}

} // namespace

void read_generation(table_reader& root, config& cfg, const std::string& config_dir) {
  auto gen = root.table("generation");
  if (!gen)
    return;
  id_registry names{"deployment"};
  for (auto& d : gen->table_array("deployments")) {
    deployment_config out;
    out.period_s = cfg.policy.planner.period_s;
    out.tick_s = cfg.policy.balancer.tick_ms / 1e3;
    out.bin_tokens = cfg.policy.planner.histogram_bin_tokens;
    out.planner.epsilon_s = cfg.policy.planner.epsilon_s;
    out.balancer.theta = cfg.policy.balancer.theta;
    auto name = d.required<std::string>("name");
    if (name && !valid_name(*name)) {
      d.error("name", fmt::format("'{}' is not a deployment name (letters, digits, '-', '_', "
                                  "'.'; at most 64)",
                                  *name));
      name.reset();
    }
    read_identity(d, cfg, out);
    read_profile(d, config_dir, out);
    read_initial(d, cfg, out);
    read_planner_knobs(d, out);
    read_command_knobs(d, out);
    d.reject_unknown();
    if (!name || !names.add(d, "name", *name))
      continue;
    out.name = *name;
    cfg.generation.push_back(std::move(out));
  }
  gen->reject_unknown();
}

} // namespace loom::config_parts
