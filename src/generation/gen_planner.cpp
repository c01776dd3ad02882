#include "generation/gen_planner.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <limits>

#include "core/inspect.hpp"
#include "store/persist.hpp"

namespace loom {

namespace {

/// Alg. 1 event 1: the forecast folded in, then the config search, timed.
gen_decision decide(gen_planner_state& st, const gen_snapshot& snap) {
  st.workload->observe(snap);
  auto requests = st.workload->estimate(snap);
  auto t0 = std::chrono::steady_clock::now();
  auto plan = plan_generation(*st.engine, st.config.gpu_budget, snap.deployment, requests,
                              st.config.params);
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
  return d;
}

} // namespace

gen_planner_actor::behavior_type
gen_planner(gen_planner_actor::stateful_pointer<gen_planner_state> self, engine_model engine,
            gen_planner_config config, store_actor store) {
  auto& st = self->state;
  st.engine.emplace(std::move(engine));
  st.workload.emplace(config.bin_tokens, config.max_tokens, config.forecast_window);
  st.config = std::move(config);
  if (st.config.profile_afd && st.config.params.afd_configs.empty())
    st.config.params.afd_configs = profile_afd_configs(*st.engine, st.config.params.gpus_per_node);
  st.store = std::move(store);
  return {
    [self](plan_atom, const gen_snapshot& snap) -> caf::result<gen_decision> {
      auto& st = self->state;
      auto d = decide(st, snap);
      if (!d.reconfigure)
        return d;
      // The engines tear instances down on this answer: it must survive a crash first.
      write_batch batch;
      batch.sync = st.config.sync_writes;
      auto promise = self->make_response_promise<gen_decision>();
      persist_and_deliver(
        self, st.store, std::move(batch),
        {event_kind::gen_reconfigured, st.config.deployment,
         fmt::format("step={} from={} to={} objective_current_s={:.1f} objective_new_s={:.1f} "
                     "switch_s={:.1f} migrate_s={:.1f} pending={}",
                     snap.step, snap.deployment.name(), d.deployment.name(), d.current_s,
                     d.objective_s, d.switch_s, d.migrate_s, snap.pending.size())},
        promise, d);
      return promise;
    },
    [self](step_done_atom, uint64_t step, const std::vector<int64_t>& outputs)
      -> caf::result<double, double> {
      auto error = self->state.workload->end_step(step, outputs);
      constexpr double none = std::numeric_limits<double>::quiet_NaN();
      return error ? caf::result<double, double>{error->histogram, error->mean_length}
                   : caf::result<double, double>{none, none};
    },
  };
}

} // namespace loom
