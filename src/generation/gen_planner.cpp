#include "generation/gen_planner.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <limits>

#include "protocol/inspect.hpp"
#include "records/gen_codecs.hpp"
#include "store/persist.hpp"

namespace loom {

namespace {

/// Alg. 1 event 1: the forecast folded in, then the config search, timed. The comparison it
/// made is kept to be scored once the step's lengths are known (plan_error).
gen_decision decide(gen_planner_state& st, const gen_snapshot& snap) {
  st.workload->observe(snap);
  auto requests = st.workload->estimate(snap);
  auto t0 = std::chrono::steady_clock::now();
  const int budget = snap.gpu_budget > 0 ? snap.gpu_budget : st.config.gpu_budget;
  auto params = st.config.params;
  params.standby = snap.standby;
  params.error_margin = st.error.margin();
  // With no step learned, every request counts at the maximum length: a switch made on that
  // chases a workload nobody forecast (gen-drive's first step lost 16% to one). Place, and
  // keep the deployment until the estimate rests on something.
  if (!st.workload->informed())
    params.epsilon_s = std::numeric_limits<double>::infinity();
  auto plan = plan_generation(*st.engine, budget, snap.deployment, requests, params);
  gen_decision d;
  d.solve_ms =
    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  d.deployment = plan.config;
  d.assignment.assign(plan.assignment.begin(), plan.assignment.end());
  d.reconfigure = plan.reconfigure;
  d.objective_s = plan.objective_s;
  d.current_s = plan.current_s;
  d.switch_s = plan.switch_s;
  d.migrate_s = plan.migrate_s;
  double total = 0;
  for (size_t i = 0; i < requests.size(); ++i)
    total += double(snap.pending[i].generated + requests[i].remaining);
  d.forecast_mean_tokens = requests.empty() ? 0.0 : total / double(requests.size());
  // A forecast's comparison (not the maximum length's), scored at the step's end: a switch's,
  // and a new batch's, where the starting deployment is chosen.
  const bool fresh = new_batch(requests);
  if (st.workload->informed() && (plan.reconfigure || fresh))
    st.error.decided({snap.step, budget, snap.deployment, plan.config, plan.alternative,
                      plan.alternative_s - plan.objective_s, std::move(requests), params});
  return d;
}

} // namespace

gen_planner_config planner_config_of(const deployment_config& d, bool sync_writes) {
  gen_planner_config pc;
  pc.deployment = d.name;
  pc.gpu_budget = d.gpus;
  pc.max_tokens = d.max_tokens;
  pc.bin_tokens = d.bin_tokens;
  pc.forecast_window = d.forecast_window;
  pc.params = d.planner;
  pc.sync_writes = sync_writes;
  return pc;
}

gen_planner_actor::behavior_type
gen_planner(gen_planner_actor::stateful_pointer<gen_planner_state> self, engine_model engine,
            gen_planner_config config, store_actor store, gen_forecast kept) {
  auto& st = self->state;
  st.engine.emplace(std::move(engine));
  st.workload.emplace(config.bin_tokens, config.max_tokens, config.forecast_window);
  st.workload->forecaster().restore(kept.history);
  st.error = plan_error{config.forecast_window};
  st.error.restore(std::move(kept.plan_errors));
  st.config = std::move(config);
  if (st.config.profile_afd && st.config.params.afd_configs.empty())
    st.config.params.afd_configs = profile_afd_configs(*st.engine, st.config.params.gpus_per_node);
  st.store = std::move(store);
  return {
    [self](plan_atom, const gen_snapshot& snap) { return decide(self->state, snap); },
    [self](step_done_atom, uint64_t step, const std::vector<request_done>& finished)
      -> caf::result<double, double> {
      auto& st = self->state;
      std::vector<int64_t> outputs;
      std::unordered_map<uint64_t, int64_t> by_id;
      for (auto& f : finished) {
        outputs.push_back(f.output_tokens);
        by_id.emplace(f.id, f.output_tokens);
      }
      st.error.ended(step, by_id, *st.engine);
      auto error = st.workload->end_step(step, outputs);
      constexpr double none = std::numeric_limits<double>::quiet_NaN();
      std::pair<double, double> answer{none, none};
      if (error)
        answer = {error->histogram, error->mean_length};
      write_batch batch;
      batch.sync = st.config.sync_writes;
      batch.records.push_back({record_kind::gen_forecasts, st.config.deployment,
                               encode_gen_forecast({st.workload->forecaster().history(),
                                                    st.error.errors()}),
                               false});
      auto promise = self->make_response_promise<double, double>();
      persist(
        self, st.store, std::move(batch), std::vector<loom_event>{},
        [promise, answer]() mutable { promise.deliver(answer.first, answer.second); },
        [promise](caf::error err) mutable { promise.deliver(std::move(err)); });
      return promise;
    },
  };
}

} // namespace loom
