#include "generation/config_search.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <queue>

#include "generation/batch_sim.hpp"

namespace loom {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

std::vector<gen_deployment> candidates(const engine_model& engine, int budget,
                                       const gen_deployment& current, size_t pending,
                                       const planner_params& p) {
  double per_gpu = double(pending) / budget;
  std::vector<gen_deployment> out;
  auto add = [&](int tp) {
    if (tp <= budget && budget % tp == 0 && engine.kv_capacity_tokens(tp) > 0)
      out.push_back({tp, budget / tp});
  };
  for (int tp = 1; tp <= p.gpus_per_node; tp *= 2)
    if (!(per_gpu < 1 && tp == 1)) // the tail wants latency: a single GPU per request is slow
      add(tp);
  if (per_gpu < p.large_batch_per_gpu) // cross-node TP, whole nodes only, outside big batches
    for (int tp = 2 * p.gpus_per_node; tp <= budget; tp *= 2)
      add(tp);
  if (current.instances > 0 && std::find(out.begin(), out.end(), current) == out.end())
    out.push_back(current);
  return out;
}

/// Longest remaining first onto the least loaded instance whose KV utilisation stays within
/// mu + delta (Eq. 2); the least utilised one if none does.
std::vector<int> balanced_assignment(const engine_model& engine, const gen_deployment& d,
                                     const std::vector<gen_request_state>& reqs,
                                     const std::vector<int>& fixed, const planner_params& p) {
  const double cap = double(engine.kv_capacity_tokens(d.tp));
  std::vector<double> load(size_t(d.instances), 0.0);
  std::vector<double> kv(size_t(d.instances), 0.0);
  std::vector<int> out = fixed;
  double total_kv = 0;
  for (auto& r : reqs)
    total_kv += double(r.context);
  const double limit = total_kv / (cap * d.instances) + p.kv_balance_delta;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (out[i] >= 0) {
      load[size_t(out[i])] += double(reqs[i].remaining);
      kv[size_t(out[i])] += double(reqs[i].context);
    }
  std::vector<size_t> order;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (out[i] < 0)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return reqs[a].remaining > reqs[b].remaining; });
  using slot = std::pair<double, int>; // load, instance
  std::priority_queue<slot, std::vector<slot>, std::greater<>> least;
  for (int k = 0; k < d.instances; ++k)
    least.emplace(load[size_t(k)], k);
  std::vector<slot> skipped;
  for (auto i : order) {
    int chosen = -1;
    while (!least.empty()) {
      auto [l, k] = least.top();
      least.pop();
      if (l != load[size_t(k)])
        continue; // stale entry
      if ((kv[size_t(k)] + double(reqs[i].context)) / cap <= limit) {
        chosen = k;
        break;
      }
      skipped.emplace_back(l, k);
    }
    if (chosen < 0) // nowhere within the band: the least utilised instance
      chosen = int(std::min_element(kv.begin(), kv.end()) - kv.begin());
    for (auto& s : skipped)
      least.push(s);
    skipped.clear();
    out[i] = chosen;
    load[size_t(chosen)] += double(reqs[i].remaining);
    kv[size_t(chosen)] += double(reqs[i].context);
    least.emplace(load[size_t(chosen)], chosen);
  }
  return out;
}

struct evaluation {
  double objective = infinity;
  double switch_s = 0;
  double migrate_s = 0;
  std::vector<int> assignment;
};

/// Eq. 1 for deployment `d`. `keep` leaves placed requests where they are (the current
/// deployment as it stands); otherwise every request is placed afresh, and those that land
/// elsewhere pay C_mig. A deployment other than the current one also pays C_sw.
evaluation evaluate(const engine_model& engine, const gen_deployment& d, bool is_current,
                    bool keep, const std::vector<gen_request_state>& reqs,
                    const planner_params& p) {
  evaluation e;
  std::vector<int> fixed(reqs.size(), -1);
  if (keep)
    for (size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i].instance >= 0 && reqs[i].instance < d.instances)
        fixed[i] = reqs[i].instance;
  e.assignment = balanced_assignment(engine, d, reqs, fixed, p);
  std::vector<std::vector<sim_request>> per(size_t(d.instances));
  std::vector<int64_t> moved(size_t(d.instances), 0);
  std::vector<int64_t> moved_tokens(size_t(d.instances), 0);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto k = size_t(e.assignment[i]);
    bool stays = is_current && reqs[i].instance == e.assignment[i];
    // Moved KV is paid for by C_mig below, so the simulator sees it resident either way;
    // requests never placed still need their prefill.
    per[k].push_back({reqs[i].context, reqs[i].remaining, stays || reqs[i].instance >= 0});
    if (!stays && reqs[i].instance >= 0) {
      ++moved[k];
      moved_tokens[k] += reqs[i].context;
    }
  }
  if (!is_current)
    e.switch_s = p.engine_restart_s + engine.weight_bytes_per_gpu(d.tp) / (p.weight_load_gbps * 1e9);
  double worst = 0;
  for (size_t k = 0; k < per.size(); ++k) {
    auto sim = simulate_instance(engine, d.tp, per[k]);
    if (!sim.feasible)
      return evaluation{};
    double mig = moved[k] > 0
                   ? kv_move_cost_of(engine, d.tp, int(moved[k]), moved_tokens[k] / moved[k],
                                     p.kv_path)
                       .best_s()
                   : 0.0;
    e.migrate_s = std::max(e.migrate_s, mig);
    worst = std::max(worst, sim.makespan_s + mig);
  }
  e.objective = worst + e.switch_s;
  return e;
}

} // namespace

gen_plan plan_generation(const engine_model& engine, int gpu_budget,
                         const gen_deployment& current,
                         const std::vector<gen_request_state>& requests,
                         const planner_params& params) {
  gen_plan plan;
  plan.config = current;
  plan.current_s = infinity;
  plan.objective_s = infinity;
  evaluation best;
  gen_deployment best_config = current;
  for (auto& d : candidates(engine, gpu_budget, current, requests.size(), params)) {
    bool is_current = d == current;
    auto e = evaluate(engine, d, is_current, is_current, requests, params);
    if (is_current) {
      plan.assignment = e.assignment;
      // The current deployment may also re-place its requests (what the balancer does, at
      // C_mig): a switch must win on the parallel config, not on a placement made under
      // older length estimates.
      if (std::any_of(requests.begin(), requests.end(), [](auto& r) { return r.instance >= 0; }))
        e.objective =
          std::min(e.objective, evaluate(engine, d, true, false, requests, params).objective);
      plan.current_s = e.objective;
    }
    plan.evaluated.push_back({d, e.objective});
    if (e.objective < best.objective) {
      best = std::move(e);
      best_config = d;
    }
  }
  // Alg. 1, event 1: Obj_new (costs included) must beat Obj_cur by more than epsilon.
  if (!(best_config == current) && best.objective < plan.current_s - params.epsilon_s) {
    plan.config = best_config;
    plan.assignment = std::move(best.assignment);
    plan.objective_s = best.objective;
    plan.switch_s = best.switch_s;
    plan.migrate_s = best.migrate_s;
    plan.reconfigure = true;
  } else {
    plan.objective_s = plan.current_s;
  }
  return plan;
}

} // namespace loom
