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
#include "drivers/ocs_driver.hpp"
#include "app/admin.hpp"
#include "app/metrics_observer.hpp"
#include "fabric/fabric_controller.hpp"
#include "gateway/gateway.hpp"
#include "gateway/keys.hpp"
#include "scheduler/cluster_scheduler.hpp"
#include "store/store_actor.hpp"

namespace loom {

namespace {

/// The fabric controller over the configured fabric, its OCS drivers, and the plans the store
/// kept from before; the actors to stop at shutdown.
caf::expected<std::vector<caf::actor>> start_fabric(caf::actor_system& sys, const config& cfg,
                                                    const store_actor& store_handle,
                                                    std::shared_ptr<service_metrics> metrics) {
  std::vector<caf::actor> actors;
  if (cfg.fabric.kind == fabric_kind::none)
    return actors;
  std::vector<node> nodes = cfg.cluster.rollout;
  nodes.insert(nodes.end(), cfg.cluster.training.begin(), cfg.cluster.training.end());
  auto model = fabric_model::build(cfg.fabric, nodes);
  if (!model)
    return model.error();
  std::map<std::string, ocs_driver_actor> drivers;
  for (auto& d : cfg.fabric.ocs) {
    auto driver = spawn_ocs_driver(sys, d);
    if (!driver) {
      spdlog::warn("event=ocs_driver_missing device={} driver={} reason=\"ZeroMQ OCS agents "
                   "attach through the gateway\"", d.id, to_string(d.driver));
      continue;
    }
    drivers[d.id] = *driver;
    actors.push_back(caf::actor_cast<caf::actor>(*driver));
  }
  std::vector<stored_record> restored;
  caf::error failed;
  {
    caf::scoped_actor self{sys};
    self->request(store_handle, caf::infinite, scan_atom::value, record_kind::circuit_plans,
                  std::string{})
      .receive([&](std::vector<stored_record>& r) { restored = std::move(r); },
               [&](caf::error& err) { failed = std::move(err); });
  }
  if (failed)
    return failed;
  fabric_controller_config fc;
  fc.safe_window_margin_s = cfg.policy.fabric.safe_window_margin_ms / 1e3;
  fc.sync_writes = cfg.storage.sync_writes;
  fc.metrics = metrics;
  auto ctl = sys.spawn(fabric_controller, *model, drivers, store_handle, fc, restored);
  actors.push_back(caf::actor_cast<caf::actor>(ctl));
  spdlog::info("event=fabric_controller_ready kind={} devices={} drivers={} restored_devices={}",
               to_string(cfg.fabric.kind), cfg.fabric.ocs.size(), drivers.size(),
               restored.size());
  return actors;
}

/// The gateway's security: the server key pair and a local admin pair (made on first start),
/// and the configured clients' public keys by role.
caf::expected<zmq_server_config> gateway_security(const config& cfg) {
  zmq_server_config z;
  z.endpoint = cfg.endpoints.gateway;
  z.insecure = cfg.security.insecure;
  if (z.insecure) {
    spdlog::warn("event=gateway_insecure reason=\"security.insecure = true: no encryption, no "
                 "authentication\"");
    return z;
  }
  auto dir = keys_dir(cfg);
  bool created = false;
  auto server = load_or_create_keypair(dir, "server", &created);
  if (!server)
    return server.error();
  z.server = *server;
  auto admin = load_or_create_keypair(dir, "admin");
  if (!admin)
    return admin.error();
  z.clients[admin->public_key] = "admin";
  for (auto& [role, files] : cfg.security.clients)
    for (auto& f : files) {
      auto key = read_key_file(f);
      if (!key)
        return key.error();
      z.clients[*key] = role;
    }
  spdlog::info("event=gateway_keys dir={} server_key={} created={} clients={}", dir,
               server->public_key, created, z.clients.size());
  return z;
}

} // namespace

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
    auto fabric = start_fabric(sys, cfg, store_handle, metrics);
    if (!fabric) {
      spdlog::error("event=fabric_failed error=\"{}\"", render(fabric.error()));
      caf::anon_send_exit(store_handle, caf::exit_reason::user_shutdown);
      return 1;
    }
    // WEAVE: the gateway is the executors' worker edge; the scheduler needs it, and it needs
    // the scheduler, so the links are filled in before its socket opens.
    auto links = std::make_shared<gateway_links>();
    gateway_config gc;
    gc.insecure = cfg.security.insecure;
    gc.heartbeat_ms = cfg.security.heartbeat_ms;
    gc.heartbeat_misses = cfg.security.heartbeat_misses;
    gc.tail_threshold = cfg.policy.weave.tail_migration_threshold;
    gc.default_slo = cfg.policy.weave.default_slo;
    auto gw = sys.spawn(gateway, gc, links, metrics);
    cluster_scheduler_config sc;
    {
      caf::scoped_actor self{sys};
      self->request(store_handle, caf::infinite, scan_atom::value, record_kind::jobs, std::string{})
        .receive([&](std::vector<stored_record>& r) { sc.restore = std::move(r); },
                 [&](caf::error& err) {
                   spdlog::error("event=job_restore_failed error=\"{}\"", render(err));
                 });
    }
    sc.cluster = cfg.cluster;
    sc.policy = cfg.policy.weave;
    sc.sync_writes = cfg.storage.sync_writes;
    auto observer = sys.spawn(metrics_observer, metrics);
    links->scheduler = sys.spawn(cluster_scheduler, sc, store_handle,
                                 caf::actor_cast<worker_actor>(gw), observer);
    poll_scheduler_metrics(sys, links->scheduler, metrics, std::chrono::seconds{1});
    for (auto& a : *fabric)
      if (auto ctl = caf::actor_cast<fabric_controller_actor>(a))
        links->fabric = ctl;
    auto security = gateway_security(cfg);
    std::unique_ptr<zmq_server> server;
    if (security) {
      auto started = zmq_server::start(
        *security,
        [gw](std::string id, std::string payload, std::string role) {
          caf::anon_send(gw, frame_atom::value, std::move(id), std::move(payload), std::move(role));
        },
        [metrics] { metrics->refused_connections().Increment(); });
      if (started)
        server = std::move(*started);
      else
        security = started.error();
    }
    if (!security) {
      spdlog::error("event=gateway_failed error=\"{}\"", render(security.error()));
      for (auto a : {caf::actor_cast<caf::actor>(gw), caf::actor_cast<caf::actor>(observer),
                     caf::actor_cast<caf::actor>(links->scheduler),
                     caf::actor_cast<caf::actor>(store_handle)})
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
      for (auto& a : *fabric)
        caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
      return 1;
    }
    links->server = server.get();
    spdlog::info("event=gateway_listening endpoint={} secure={}", server->endpoint(),
                 !cfg.security.insecure);
    spdlog::info("event=serve_ready pid={}", static_cast<long>(getpid()));

    int sig = await_shutdown_signal();
    spdlog::info("event=shutdown_requested signal={}", sigabbrev_np(sig));
    links->server = nullptr;
    server.reset();
    caf::anon_send_exit(gw, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(observer, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(links->scheduler, caf::exit_reason::user_shutdown);
    links.reset();
    for (auto& a : *fabric)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store_handle, caf::exit_reason::user_shutdown);
    store_handle = nullptr;
    sys.await_all_actors_done();
  }
  spdlog::info("event=serve_stopped exit_code=0");
  return 0;
}

} // namespace loom
