#include "generation/gen_planner.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <limits>


namespace loom {

namespace {

using planner_ptr = gen_planner_actor::stateful_pointer<gen_planner_state>;

} // namespace

gen_planner_actor::behavior_type gen_planner(planner_ptr self, engine_model engine,
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
      if (!d.reconfigure)
        return d;
      // The engines tear instances down on this answer: it must survive a crash first.
      auto detail = fmt::format("step {}: {} -> {} (Obj_cur {:.1f} s, Obj_new {:.1f} s, "
                                "C_sw {:.1f} s, C_mig {:.1f} s, {} pending)",
                                snap.step, snap.deployment.name(), d.deployment.name(),
                                d.current_s, d.objective_s, d.switch_s, d.migrate_s,
                                snap.pending.size());
      write_batch batch;
      batch.events.push_back(encode_event(self->clock().now().time_since_epoch().count(),
                                          "gen_reconfigured", st.config.deployment, detail));
      batch.sync = st.config.sync_writes;
      auto promise = self->make_response_promise<gen_decision>();
      self->request(st.store, caf::infinite, write_atom::value, std::move(batch))
        .then(
          [self, promise, d, detail](uint64_t) mutable {
            spdlog::info("event=gen_reconfigured deployment={} detail=\"{}\"",
                         self->state.config.deployment, detail);
            promise.deliver(d);
          },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
      return promise;
    },
    [self](step_atom, uint64_t step, const std::vector<int64_t>& outputs)
      -> caf::result<double, double> {
      auto error = self->state.workload->end_step(step, outputs);
      constexpr double none = std::numeric_limits<double>::quiet_NaN();
      return error ? caf::result<double, double>{error->histogram, error->mean_length}
                   : caf::result<double, double>{none, none};
    },
  };
}

} // namespace loom
