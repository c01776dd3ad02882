#include "app/metrics_observer.hpp"

#include <caf/all.hpp>

#include "protocol/inspect.hpp"

namespace loom {

observer_actor::behavior_type
metrics_observer(observer_actor::stateful_pointer<metrics_observer_state> self,
                 std::shared_ptr<service_metrics> metrics) {
  self->state.metrics = std::move(metrics);
  return {
    [self](cluster_atom, const cluster_record& r) {
      if (r.decision_us > 0)
        self->state.metrics->decision_latency().Observe(r.decision_us / 1e6);
    },
    [self](iteration_atom, const iteration_record& r) {
      // WEAVE §4.2's SLO on each basis, as the replay report judges it (weave_summary).
      using basis = service_metrics::slo_basis;
      auto judged = [&](double solo_s) -> std::optional<bool> {
        if (r.index == 0)
          return std::nullopt;
        return solo_s <= 0 || within_slo(r.duration_s, r.slo, solo_s);
      };
      auto& m = *self->state.metrics;
      m.iterations(basis::planned, judged(r.planned_solo_s)).Increment();
      m.iterations(basis::measured, judged(r.solo_s)).Increment();
    },
    [self](overrun_atom, const std::string&, phase_kind phase, double) {
      self->state.metrics->phase_overruns(std::string{to_string(phase)}).Increment();
    },
  };
}

gen_observer_actor::behavior_type
gen_metrics(gen_observer_actor::stateful_pointer<gen_metrics_state> self,
            std::shared_ptr<service_metrics> metrics) {
  self->state.metrics = std::move(metrics);
  return {
    [self](gen_atom, const gen_record& r) {
      auto& m = *self->state.metrics;
      switch (r.kind) {
        case gen_record_kind::reconfigured: m.gen_reconfigurations(r.deployment).Increment(); break;
        case gen_record_kind::migrated: {
          const char* mode = r.mode == kv_mode::transfer    ? "kv"
                             : r.mode == kv_mode::recompute ? "recompute"
                                                            : "queued";
          m.gen_migrations(r.deployment, mode).Increment();
          break;
        }
        case gen_record_kind::planned: m.gen_solve_seconds().Observe(r.solve_ms / 1e3); break;
        case gen_record_kind::switched: m.gen_switch_seconds().Observe(r.switch_s); break;
        case gen_record_kind::forecast_scored:
          if (r.forecast_error >= 0)
            m.gen_forecast_error(r.deployment).Set(r.forecast_error);
          break;
        case gen_record_kind::step_done: m.gen_steps(r.deployment).Increment(); break;
        case gen_record_kind::engine_lost: m.gen_engines_lost(r.deployment).Increment(); break;
        case gen_record_kind::command_retried:
          m.gen_commands(r.deployment, "retried").Increment();
          break;
        case gen_record_kind::command_abandoned:
          m.gen_commands(r.deployment, "abandoned").Increment();
          break;
        default: break;
      }
    },
  };
}

void poll_scheduler_metrics(caf::actor_system& sys, cluster_scheduler_actor scheduler,
                            std::shared_ptr<service_metrics> metrics,
                            std::chrono::milliseconds period) {
  sys.spawn([scheduler, metrics, period](caf::event_based_actor* self) {
    self->link_to(scheduler);
    auto poll = [=] {
      self->request(scheduler, caf::infinite, census_atom::value)
        .then(
          [metrics](const scheduler_census& c) {
            for (auto s : all_values<job_state>()) {
              auto n = c.jobs.find(s);
              metrics->jobs(std::string{to_string(s)})
                .Set(n == c.jobs.end() ? 0 : double(n->second));
            }
            metrics->groups().Set(double(c.groups));
            metrics->actors_up("group_executor").Set(double(c.executors));
          },
          [](caf::error&) {});
    };
    poll();
    self->become([=](tick_atom) {
      poll();
      self->delayed_send(self, period, tick_atom::value);
    });
    self->delayed_send(self, period, tick_atom::value);
  });
}

} // namespace loom
