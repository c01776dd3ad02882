#include "app/serve.hpp"

#include <caf/all.hpp>
#include <csignal>
#include <cstring>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include "app/metrics.hpp"
#include "app/signals.hpp"
#include "core/error.hpp"
#include "core/type_registry.hpp"
#include "store/store_actor.hpp"

namespace loom {

int serve(const config& cfg) {
  // Before any thread exists: only the main thread will ever receive SIGINT/SIGTERM.
  block_shutdown_signals();
  spdlog::info("event=serve_starting service={} config={} cluster={} rollout_nodes={} "
               "training_nodes={} fabric={}",
               cfg.service_name, cfg.source, cfg.cluster.name, cfg.cluster.rollout.size(),
               cfg.cluster.training.size(), to_string(cfg.fabric.kind));

  auto db = database::open(cfg.storage.path);
  if (!db) {
    spdlog::error("event=store_open_failed error=\"{}\"", render(db.error()));
    return 1;
  }
  spdlog::info("event=store_opened path={} jobs={} groups={} placements={} circuit_plans={} "
               "last_event_seq={}",
               cfg.storage.path, (*db)->count(record_kind::jobs), (*db)->count(record_kind::groups),
               (*db)->count(record_kind::placements), (*db)->count(record_kind::circuit_plans),
               (*db)->last_event_seq());

  auto metrics = std::make_shared<service_metrics>();
  auto endpoint = metrics_endpoint::start(cfg.endpoints.metrics, *metrics);
  if (!endpoint) {
    spdlog::error("event=metrics_failed error=\"{}\"", render(endpoint.error()));
    return 1;
  }
  spdlog::info("event=metrics_listening address={} port={}", cfg.endpoints.metrics,
               (*endpoint)->port());
  metrics->config_generation().Set(1);

  caf::actor_system_config sys_cfg;
  register_loom_types(sys_cfg);
  {
    caf::actor_system sys{sys_cfg};
    auto store_handle = sys.spawn(store, std::shared_ptr<database>{std::move(*db)}, metrics);
    // Actors initialise asynchronously: one round trip makes "ready" mean the store answers.
    caf::error not_ready;
    {
      caf::scoped_actor self{sys}; // gone before shutdown waits for all actors
      self->request(store_handle, caf::infinite, flush_atom::value)
        .receive([](ok_atom) {}, [&](caf::error& err) { not_ready = std::move(err); });
    }
    if (not_ready) {
      spdlog::error("event=store_not_ready error=\"{}\"", render(not_ready));
      caf::anon_send_exit(store_handle, caf::exit_reason::user_shutdown);
      return 1;
    }
    spdlog::info("event=serve_ready pid={}", static_cast<long>(getpid()));

    int sig = await_shutdown_signal();
    spdlog::info("event=shutdown_requested signal={}", sigabbrev_np(sig));
    caf::anon_send_exit(store_handle, caf::exit_reason::user_shutdown);
    store_handle = nullptr;
    sys.await_all_actors_done();
  }
  spdlog::info("event=serve_stopped exit_code=0");
  return 0;
}

} // namespace loom
