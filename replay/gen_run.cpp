#include "replay/gen_run.hpp"

#include <caf/all.hpp>

#include "generation/balancer.hpp"
#include "generation/gen_controller.hpp"
#include "generation/gen_planner.hpp"
#include "metrics/metrics.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "replay/driver.hpp"
#include "replay/report.hpp"
#include "replay/request.hpp"
#include "store/store_actor.hpp"

namespace loom::replay {

caf::expected<gen_run_log> run_generation(const engine_model& engine, const gen_run_spec& spec) {
  auto db = open_scratch_store(spec.store_dir);
  if (!db)
    return db.error();
  std::shared_ptr<database> shared{std::move(*db)};
  auto log = std::make_shared<gen_run_log>();
  const auto& dep = spec.deployment;
  driver d;
  auto& sys = d.system();
  std::vector<caf::actor> all;
  auto keep = [&](auto h) {
    all.push_back(caf::actor_cast<caf::actor>(h));
    return h;
  };
  gen_controller_links links;
  links.store = keep(sys.spawn(store, shared, std::make_shared<service_metrics>()));
  links.sync_writes = false; // replay's store is scratch; live serve syncs
  if (dep.planner_enabled)
    links.planner = keep(sys.spawn(gen_planner, engine, planner_config_of(dep, false),
                                   links.store, gen_forecast{}));
  if (dep.balancer_enabled)
    links.balancer = keep(sys.spawn(balancer, dep.balancer));
  links.observer = keep(sys.spawn(gen_recorder, log, spec.sim.curve_step));
  auto sim = sys.spawn(simulated_generation, engine, spec.sim, log);
  links.edge = caf::actor_cast<engine_edge_actor>(sim);
  auto controller = keep(sys.spawn(gen_controller, engine, dep, links, gen_controller_restore{}));
  caf::anon_send(sim, connect_atom::value, controller);
  const auto run = d.run_to_quiescence();
  log->events = int64_t(run.messages + run.timeouts);
  auto status = request_now<gen_status>(d, controller, status_atom::value);
  for (auto& a : all)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  d.run_to_quiescence();
  if (!log->done)
    return make_error(errc::invalid_argument,
                      log->error.empty() ? "the run stopped before its last step" : log->error);
  if (status.value) {
    auto& c = status.value->counters;
    log->reconfigurations = c.reconfigurations;
    log->migrations = c.migrations;
    log->kv_transfers = c.kv_transfers;
    log->kv_recomputes = c.kv_recomputes;
  }
  return std::move(*log);
}

} // namespace loom::replay
