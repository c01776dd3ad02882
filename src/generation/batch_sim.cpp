#include "generation/batch_sim.hpp"

#include <algorithm>

namespace loom {

instance_result simulate_instance(const engine_model& engine, const parallel_config& config,
                                  const std::vector<sim_request>& requests,
                                  decode_terms_table* terms, double give_up_s,
                                  std::vector<double>* finishes) {
  instance_sim sim{engine, config, terms};
  sim.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i)
    sim.add(i, requests[i]);
  sim.advance_to(give_up_s); // runs to completion unless the clock reaches give_up_s first
  if (finishes)
    for (auto& f : sim.finished())
      finishes->push_back(f.second);
  const bool stopped = sim.feasible() && !sim.idle();
  const double makespan = stopped ? std::numeric_limits<double>::infinity() : sim.now();
  return {makespan, sim.steps(), sim.preemptions(), sim.peak_batch(), sim.feasible()};
}

instance_result simulate_deployment(const engine_model& engine, const parallel_config& config,
                                    int dp,
                                    const std::vector<sim_request>& requests) {
  std::vector<std::vector<sim_request>> shards(static_cast<size_t>(dp));
  for (size_t i = 0; i < requests.size(); ++i)
    shards[i % shards.size()].push_back(requests[i]);
  instance_result worst;
  decode_terms_table terms{engine, config};
  for (auto& shard : shards) {
    auto r = simulate_instance(engine, config, shard, &terms);
    worst.feasible = worst.feasible && r.feasible;
    worst.preemptions += r.preemptions;
    worst.peak_batch = std::max(worst.peak_batch, r.peak_batch);
    if (r.makespan_s > worst.makespan_s) {
      worst.makespan_s = r.makespan_s;
      worst.steps = r.steps;
    }
  }
  return worst;
}

} // namespace loom
