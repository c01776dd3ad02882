#include "app/serve.hpp"

#include <caf/all.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <unistd.h>
#include <spdlog/spdlog.h>

#include "app/admin.hpp"
#include "app/device_probe.hpp"
#include "app/logging.hpp"
#include "app/metrics.hpp"
#include "app/metrics_observer.hpp"
#include "app/signals.hpp"
#include "drivers/agent_driver.hpp"
#include "drivers/ocs_driver.hpp"
#include "fabric/fabric_controller.hpp"
#include "gateway/gateway.hpp"
#include "gateway/keys.hpp"
#include "ha/replica.hpp"
#include "generation/balancer.hpp"
#include "generation/gen_controller.hpp"
#include "generation/gen_planner.hpp"
#include "generation/gen_restore.hpp"
#include "protocol/ask_now.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/live_scheduler.hpp"
#include "protocol/type_registry.hpp"
#include "records/codecs.hpp"
#include "scheduler/cluster_scheduler.hpp"
#include "store/store_actor.hpp"

namespace loom {

namespace {

/// The actors of a running service, in start order, each counted in loom_actors_up by kind
/// while it runs. Stopping them is written once: in reverse order, whatever ended the service
/// (a start that failed, or a signal).
class service_actors {
public:
  explicit service_actors(std::shared_ptr<service_metrics> metrics)
    : metrics_(std::move(metrics)) {}

  template <class Handle>
  Handle add(const char* kind, Handle h) {
    auto a = caf::actor_cast<caf::actor>(h);
    metrics_->actors_up(kind).Increment();
    a->attach_functor([metrics = metrics_, kind] { metrics->actors_up(kind).Decrement(); });
    started_.push_back(std::move(a));
    return h;
  }

  ~service_actors() {
    for (auto it = started_.rbegin(); it != started_.rend(); ++it)
      caf::anon_send_exit(*it, caf::exit_reason::user_shutdown);
  }

private:
  std::shared_ptr<service_metrics> metrics_;
  std::vector<caf::actor> started_;
};

/// The fabric controller over the configured fabric, its OCS drivers, and the plans the store
/// kept from before; null when the service runs no fabric.
/// `agents` receives the drivers of the devices OCS agents drive, for the gateway.
caf::expected<fabric_controller_actor> start_fabric(caf::actor_system& sys, const config& cfg,
                                                    const store_actor& store,
                                                    std::shared_ptr<service_metrics> metrics,
                                                    service_actors& actors,
                                                    std::map<std::string, agent_driver_actor>& agents) {
  if (cfg.fabric.kind == fabric_kind::none)
    return fabric_controller_actor{};
  std::vector<node> nodes = cfg.cluster.rollout;
  nodes.insert(nodes.end(), cfg.cluster.training.begin(), cfg.cluster.training.end());
  auto model = fabric_model::build(cfg.fabric, nodes);
  if (!model.value)
    return make_error(errc::invalid_config, model.error);
  std::map<std::string, ocs_driver_actor> drivers;
  for (auto& d : cfg.fabric.ocs) {
    if (d.driver == driver_kind::zmq) {
      agents[d.id] = actors.add("ocs_agent_driver", spawn_agent_driver(sys, d));
      drivers[d.id] = caf::actor_cast<ocs_driver_actor>(agents[d.id]);
      continue;
    }
    auto driver = spawn_ocs_driver(sys, d);
    if (!driver) {
      spdlog::warn("event=ocs_driver_missing device={} driver={} reason=\"no driver of this "
                   "kind in this build\"", d.id, d.driver);
      continue;
    }
    drivers[d.id] = actors.add("ocs_driver", *driver);
  }
  probe_devices(sys, cfg.fabric.ocs, drivers);
  fabric_restored restored;
  for (auto [kind, into] : {std::pair{record_kind::circuit_plans, &restored.plans},
                            std::pair{record_kind::opus_jobs, &restored.opus_jobs}}) {
    auto records = ask_now<std::vector<stored_record>>(sys, store, scan_atom::value, kind,
                                                       std::string{});
    if (!records)
      return records.error();
    *into = std::move(*records);
  }
  fabric_controller_config fc;
  fc.safe_window_margin_s = cfg.policy.fabric.safe_window_margin_ms / 1e3;
  fc.sync_writes = cfg.storage.sync_writes;
  fc.metrics = metrics;
  fc.health_poll = std::chrono::milliseconds{cfg.policy.fabric.health_poll_ms};
  fc.port_masks_per_minute = cfg.policy.fabric.port_masks_per_minute;
  const auto restored_devices = restored.plans.size();
  const auto restored_opus = restored.opus_jobs.size();
  auto ctl = actors.add("fabric_controller", sys.spawn(fabric_controller, std::move(*model.value),
                                                       drivers, store, fc, std::move(restored)));
  spdlog::info("event=fabric_controller_ready kind={} devices={} drivers={} restored_devices={} "
               "restored_opus_jobs={}",
               cfg.fabric.kind, cfg.fabric.ocs.size(), drivers.size(), restored_devices,
               restored_opus);
  return ctl;
}

/// The client keys the gateway admits: the local admin key and every [security.clients] file.
caf::expected<std::map<std::string, worker_role>> client_keys(const config& cfg) {
  std::map<std::string, worker_role> out;
  auto admin = load_or_create_keypair(keys_dir(cfg), "admin");
  if (!admin)
    return admin.error();
  out[admin->public_key] = worker_role::admin;
  for (auto& [role, files] : cfg.security.clients)
    for (auto& f : files) {
      auto key = read_key_file(f);
      if (!key)
        return key.error();
      out[*key] = role;
    }
  return out;
}

/// The gateway's security: the server key pair and a local admin pair (made on first start),
/// and the configured clients' public keys by role.
caf::expected<zmq_server_config> gateway_security(const config& cfg, bool store_created,
                                                  bool new_keys) {
  zmq_server_config z;
  z.endpoint = cfg.endpoints.gateway;
  z.insecure = cfg.security.insecure;
  if (z.insecure) {
    spdlog::warn("event=gateway_insecure reason=\"security.insecure = true: no encryption, no "
                 "authentication\"");
    return z;
  }
  auto dir = keys_dir(cfg);
  auto secret = std::filesystem::path{dir} / "server.secret";
  if (!store_created && !new_keys && !std::filesystem::exists(secret))
    return make_error(errc::invalid_argument,
                      fmt::format("{} is missing but the database {} already holds state: a new "
                                  "server identity would lock every client out. Restore the "
                                  "keys directory, or start with --new-keys to make a new one "
                                  "(clients then need the new server.pub)",
                                  secret.string(), cfg.storage.path));
  bool created = false;
  auto server = load_or_create_keypair(dir, "server", &created);
  if (!server)
    return server.error();
  z.server = *server;
  auto clients = client_keys(cfg);
  if (!clients)
    return clients.error();
  z.clients = std::move(*clients);
  spdlog::info("event=gateway_keys dir={} server_key={} created={} clients={}", dir,
               server->public_key, created, z.clients.size());
  return z;
}

/// The scheduler with the jobs the store kept, working through `worker`, telling `fabric` (if
/// any) of failed servers.
caf::expected<cluster_scheduler_actor> start_scheduler(caf::actor_system& sys,
                                                       const config& cfg,
                                                       const store_actor& store,
                                                       const worker_actor& worker,
                                                       const observer_actor& observer,
                                                       const fabric_controller_actor& fabric,
                                                       service_actors& actors) {
  cluster_scheduler_config sc;
  sc.fabric = fabric;
  for (auto [kind, into] : {std::pair{record_kind::jobs, &sc.restore.jobs},
                            std::pair{record_kind::groups, &sc.restore.groups},
                            std::pair{record_kind::placements, &sc.restore.placements},
                            std::pair{record_kind::progress, &sc.restore.progress}}) {
    auto records = ask_now<std::vector<stored_record>>(sys, store, scan_atom::value, kind,
                                                       std::string{});
    if (!records)
      return records.error();
    *into = std::move(*records);
  }
  auto meta = ask_now<std::string>(sys, store, get_atom::value, record_kind::meta,
                                   std::string{scheduler_meta_key});
  if (meta)
    sc.restore.meta = std::move(*meta);
  else if (code_of(meta.error()) != errc::not_found)
    return meta.error();
  sc.cluster = cfg.cluster;
  sc.policy = cfg.policy.weave;
  sc.sync_writes = cfg.storage.sync_writes;
  return actors.add("cluster_scheduler",
                    sys.spawn(cluster_scheduler, std::move(sc), store, worker, observer));
}

/// One deployment's planner, balancer and controller, working through the gateway's engine
/// sessions, restored from what the store kept.
caf::error start_deployment(caf::actor_system& sys, const config& cfg,
                            const deployment_config& dep, const store_actor& store,
                            const gateway_actor& gw, const gen_observer_actor& observer,
                            service_actors& actors) {
  auto restored = restore_deployment(sys, store, dep.name);
  if (!restored)
    return restored.error();
  engine_model engine{*find_model(dep.model), *cfg.cluster.find_gpu(dep.gpu),
                      engine_params_of(dep), dep.profile};
  gen_controller_links links;
  links.store = store;
  links.edge = caf::actor_cast<engine_edge_actor>(gw);
  links.observer = observer;
  links.sync_writes = cfg.storage.sync_writes;
  if (dep.planner_enabled)
    links.planner =
      actors.add("gen_planner", sys.spawn(gen_planner, engine,
                                          planner_config_of(dep, cfg.storage.sync_writes), store,
                                          std::move(restored->forecast)));
  if (dep.balancer_enabled)
    links.balancer = actors.add("balancer", sys.spawn(balancer, dep.balancer));
  const bool resumed = restored->controller.record.has_value();
  auto ctl = actors.add("gen_controller", sys.spawn(gen_controller, engine, dep, links,
                                                    std::move(restored->controller)));
  caf::anon_send(gw, connect_atom::value, dep.name, ctl);
  spdlog::info("event=gen_deployment_ready deployment={} model={} gpus={} initial={} planner={} "
               "balancer={} restored={}",
               dep.name, dep.model, dep.gpus, dep.initial.name(), dep.planner_enabled,
               dep.balancer_enabled, resumed);
  return caf::none;
}

gateway_config gateway_settings(const config& cfg) {
  gateway_config gc;
  gc.insecure = cfg.security.insecure;
  gc.heartbeat_ms = cfg.security.heartbeat_ms;
  gc.heartbeat_misses = cfg.security.heartbeat_misses;
  gc.frames_per_s_per_key = cfg.security.frames_per_s_per_key;
  gc.frames_per_s_per_session = cfg.security.frames_per_s_per_session;
  gc.sessions_per_key = cfg.security.sessions_per_key;
  gc.tail_threshold = cfg.policy.weave.tail_migration_threshold;
  gc.default_slo = cfg.policy.weave.default_slo;
  for (auto& d : cfg.generation)
    gc.stats_interval_ms[d.name] = uint32_t(std::max(1.0, d.tick_s * 1e3));
  if (cfg.fabric.kind != fabric_kind::none)
    for (uint32_t i = 0; i < cfg.fabric.pods.size(); ++i)
      for (auto& server : cfg.fabric.pods[i].servers)
        gc.pods[server] = i;
  return gc;
}

/// Workers hear the service is going away (and register with the next one); waiting requests
/// are answered. Bounded: a stop never waits on a busy gateway for long.
void tell_sessions_stopping(caf::actor_system& sys, const gateway_actor& gw) {
  caf::scoped_actor self{sys};
  self->request(gw, std::chrono::seconds{1}, stopping_atom::value)
    .receive([](ok_atom) {},
             [](caf::error& err) {
               spdlog::warn("event=stopping_notice_failed error=\"{}\"", render(err));
             });
}

/// SIGHUP: what can change safely changes now (client keys, log level); what cannot is named
/// in the log and waits for a restart. A config with errors changes nothing.
void reload(config& running, const serve_options& options, zmq_server& socket) {
  auto next = options.reload ? options.reload() : std::optional<config>{};
  if (!next) {
    spdlog::error("event=reload_refused reason=\"the config has errors (printed above); the "
                  "running one stays\"");
    return;
  }
  auto clients = client_keys(*next);
  if (!running.security.insecure && !clients) {
    spdlog::error("event=reload_refused reason=\"{}; the running config stays\"",
                  render(clients.error()));
    return;
  }
  auto restart = changed_settings(running, *next, {"security.clients", "service.log_level"});
  const size_t keys = clients ? clients->size() : 0;
  if (!running.security.insecure)
    socket.set_clients(std::move(*clients));
  running.security.clients = next->security.clients;
  running.level = next->level;
  // What was applied becomes the baseline; what was not keeps being reported until restart.
  // Logged before the new level applies, so that a quieter level still shows the reload.
  spdlog::info("event=config_reloaded source={} client_keys={} log_level={} "
               "needs_restart=\"{}\" note=\"a removed key's open connections stay until they "
               "reconnect\"",
               next->source, keys, to_string(next->level),
               fmt::join(restart, ","));
  set_log_level(next->level);
}

/// A suspended leader's store refuses what waits for it (READ_ONLY): once it has answered
/// everything before this request (a commit may be retrying on every etcd endpoint), the
/// refusals have a moment to reach their clients before the gateway closes.
void refuse_waiting_writes(caf::actor_system& sys, const store_actor& store, const ha_config& ha) {
  const auto patience = std::chrono::milliseconds{2 * ha.request_timeout_ms * ha.endpoints.size()};
  caf::scoped_actor self{sys};
  self->request(store, patience, flush_atom::value).receive([](ok_atom) {}, [](caf::error&) {});
  std::this_thread::sleep_for(std::chrono::milliseconds{100});
}

/// Why a service's run ended.
enum class service_end {
  stopped,  // SIGINT or SIGTERM
  resigned, // SIGUSR1: a leader steps down for another replica ([ha])
  deposed,  // its leadership ended on its own ([ha]: the lease, or another leader)
  suspended, // [ha]: etcd did not renew its lease or confirm a commit in time (no quorum?)
};

/// SIGHUP reloads; anything else ends the run. A leader ([ha]) also looks at its term every
/// 100 ms (the gateway's fence keeps what it decides in the meantime in), and a service
/// without [ha] has nothing to resign.
service_end await_end(const config& cfg, const serve_options& options, zmq_server& socket,
                      const replica* ha) {
  config running = cfg;
  for (;;) {
    const int sig = ha ? await_service_signal(std::chrono::milliseconds{100})
                       : await_service_signal();
    if (sig == SIGHUP) {
      reload(running, options, socket);
      continue;
    }
    if (sig == SIGUSR1 && !ha) {
      spdlog::info("event=resign_ignored reason=\"SIGUSR1 makes a leader step down; this "
                   "service runs without [ha]\"");
      continue;
    }
    if (sig == SIGUSR1)
      return service_end::resigned;
    if (sig != 0) {
      spdlog::info("event=shutdown_requested signal={}", sigabbrev_np(sig));
      return service_end::stopped;
    }
    if (ha->term_over() && ha->lost())
      return service_end::deposed;
    if (ha->term_over())
      return service_end::suspended;
  }
}

/// Every actor of the service, then the gateway's socket; runs until a shutdown signal, or
/// ([ha]) until this replica no longer leads.
caf::expected<service_end> run_service(caf::actor_system& sys, const config& cfg,
                                       const serve_options& options,
                                       std::shared_ptr<database> db,
                                       std::shared_ptr<service_metrics> metrics,
                                       std::shared_ptr<replica> ha) {
  service_actors actors{metrics};
  const bool store_created = db->created();
  // The store on a thread of its own: its WAL syncs (and [ha]'s etcd commits) block, and on
  // one of the scheduler's threads they stalled every other actor meanwhile (16 admitting
  // clients: 0.40-0.41 -> 0.43 of the group-commit floor, bench_admission).
  auto store_handle =
    ha ? actors.add("store",
                    sys.spawn<caf::detached>(replicated_store, std::move(db), metrics, ha))
       : actors.add("store", sys.spawn<caf::detached>(store, std::move(db), metrics));
  // Actors initialise asynchronously: one round trip makes "ready" mean the store answers.
  if (auto ready = ask_now<ok_atom>(sys, store_handle, flush_atom::value); !ready)
    return ready.error();
  caf::anon_send(store_handle, health_atom::value); // watches its directory from now on
  std::map<std::string, agent_driver_actor> agents;
  auto fabric = start_fabric(sys, cfg, store_handle, metrics, actors, agents);
  if (!fabric)
    return fabric.error();
  auto security = gateway_security(cfg, store_created, options.new_keys);
  if (!security)
    return security.error();
  auto server = zmq_server::open(*security, [metrics] { metrics->refused_connections().Increment(); });
  if (!server)
    return server.error();
  std::shared_ptr<zmq_server> socket = std::move(*server);
  if (ha)
    socket->fence([ha] { return ha->leading(); });
  auto gw = actors.add("gateway", sys.spawn(gateway, gateway_settings(cfg), socket, metrics));
  auto observer = actors.add("metrics_observer", sys.spawn(metrics_observer, metrics));
  auto scheduler = start_scheduler(sys, cfg, store_handle, caf::actor_cast<worker_actor>(gw),
                                   observer, *fabric, actors);
  if (!scheduler)
    return scheduler.error();
  // Ready means ready: the scheduler has restored every stored job and answers.
  if (auto restored = ask_now<scheduler_census>(sys, *scheduler, census_atom::value); !restored)
    return restored.error();
  poll_scheduler_metrics(sys, *scheduler, metrics, std::chrono::seconds{1});
  caf::anon_send(gw, connect_atom::value, *scheduler, *fabric);
  for (auto& [device, driver] : agents)
    caf::anon_send(gw, ocs_atom::value, device, driver);
  if (!cfg.generation.empty()) {
    auto gen_observer = actors.add("gen_metrics", sys.spawn(gen_metrics, metrics));
    for (auto& d : cfg.generation)
      if (auto err = start_deployment(sys, cfg, d, store_handle, gw, gen_observer, actors))
        return err;
  }
  socket->run([gw](std::vector<wire_frame> frames) {
    caf::anon_send(gw, frame_atom::value, std::move(frames));
  });
  spdlog::info("event=gateway_listening endpoint={} secure={}", socket->endpoint(),
               !cfg.security.insecure);
  set_health(service_health::ready);
  spdlog::info("event=serve_ready pid={}", static_cast<long>(getpid()));
  const auto end = await_end(cfg, options, *socket, ha.get());
  if (end == service_end::suspended)
    refuse_waiting_writes(sys, store_handle, *cfg.ha);
  set_health(service_health::stopping);
  tell_sessions_stopping(sys, gw);
  socket->stop(); // what the gateway queued goes out first
  return end;
}

} // namespace

namespace {

/// The database read-write; on a full disk or a read-only mount, an existing one read-only (the
/// store takes writes again once it can, without a restart).
caf::expected<std::unique_ptr<database>> open_storage(const std::string& path,
                                                       wal_recovery recovery) {
  auto db = database::open(path, recovery);
  if (db
      || (code_of(db.error()) != errc::storage_full
          && code_of(db.error()) != errc::storage_read_only))
    return db;
  auto ro = database::open_read_only(path, message_of(db.error()));
  if (!ro)
    return db.error();
  return ro;
}

} // namespace

/// SIGHUP on a standby: its next term starts as a restart would, with the whole config read
/// again ([ha] itself excepted: its replica keeps its etcd session).
void reload_standby(config& current, const serve_options& options) {
  auto next = options.reload ? options.reload() : std::optional<config>{};
  if (!next) {
    spdlog::error("event=reload_refused reason=\"the config has errors (printed above); the "
                  "one read before stays\"");
    return;
  }
  auto restart = changed_settings(current, *next, {});
  std::erase_if(restart, [](const std::string& k) { return k.rfind("ha", 0) != 0; });
  next->ha = current.ha;
  current = std::move(*next);
  set_log_level(current.level);
  spdlog::info("event=config_reloaded role=standby source={} needs_restart=\"{}\" "
               "note=\"the rest applies when this replica leads\"",
               current.source, fmt::join(restart, ","));
}

/// [ha]: stands by until elected, leads until deposed, resigned or stopped, and stands by
/// again after each term; returns when a signal stops it.
template <class Run>
caf::error lead_when_elected(const config& cfg, const serve_options& options,
                             std::shared_ptr<database> store,
                             const std::shared_ptr<service_metrics>& metrics,
                             uint16_t metrics_port, Run& run) {
  const auto& ha_cfg = *cfg.ha;
  config current = cfg; // a standby's SIGHUP reads the config its next term starts with
  auto host = cfg.endpoints.metrics.substr(0, cfg.endpoints.metrics.rfind(':'));
  auto ha = std::make_shared<replica>(ha_cfg, fmt::format("{}:{}", host, metrics_port), metrics);
  spdlog::info("event=ha_starting replica={} etcd=\"{}\" prefix={} lease_ttl_s={} "
               "advertise={}",
               ha_cfg.name, fmt::join(ha_cfg.endpoints, ","), ha_cfg.prefix, ha_cfg.lease_ttl_s,
               ha_cfg.advertise);
  for (;;) {
    set_health(service_health::standby);
    if (!store) { // the last term's store closed it
      auto db = open_storage(cfg.storage.path, options.recovery);
      if (!db)
        return db.error();
      store = std::move(*db);
    }
    bool stop = false;
    const bool elected = ha->stand_by(store, [&] {
      const int sig = await_service_signal(std::chrono::milliseconds{0});
      if (sig == SIGINT || sig == SIGTERM)
        stop = true;
      else if (sig == SIGHUP)
        reload_standby(current, options);
      else if (sig != 0)
        spdlog::info("event=signal_ignored signal={} reason=\"a standby has nothing to "
                     "resign\"",
                     sigabbrev_np(sig));
      return stop;
    });
    if (!elected)
      return caf::none;
    auto end = run(current, std::move(store), ha);
    if (!end || *end == service_end::stopped || *end == service_end::resigned)
      ha->stand_down(!end ? "it failed to start"
                     : *end == service_end::resigned ? "SIGUSR1: it resigned"
                                                     : "it was stopped");
    if (!end)
      return end.error();
    if (*end == service_end::stopped)
      return caf::none;
    spdlog::warn("event=ha_standing_by_again replica={} reason={}", ha_cfg.name,
                 *end == service_end::resigned  ? "resigned"
                 : *end == service_end::deposed ? "deposed"
                                                : "suspended");
  }
}

int serve(const config& cfg, const serve_options& options) {
  // Before any thread exists: only the main thread will ever receive SIGINT/SIGTERM.
  block_service_signals();
  // The actors' clock is the steady one; the event log gets wall-clock times.
  set_event_clock_offset(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch()
                           - caf::actor_clock::clock_type::now().time_since_epoch())
                           .count());
  spdlog::info("event=serve_starting service={} config={} cluster={} rollout_nodes={} "
               "training_nodes={} fabric={}",
               cfg.service_name, cfg.source, cfg.cluster.name, cfg.cluster.rollout.size(),
               cfg.cluster.training.size(), cfg.fabric.kind);
  auto db = open_storage(cfg.storage.path, options.recovery);
  if (!db) {
    spdlog::error("event=store_open_failed error=\"{}\"", render(db.error()));
    return 1;
  }
  if ((*db)->read_only())
    spdlog::error("event=store_read_only path={} reason=\"{}\"", cfg.storage.path,
                  (*db)->read_only_cause());
  // Jobs and groups are counted by event=scheduler_restored: walking them here too was a
  // second scan of the store at 100,000 jobs (#49).
  spdlog::info("event=store_opened path={} circuit_plans={} last_event_seq={} writable={} "
               "recovery={}",
               cfg.storage.path, (*db)->count(record_kind::circuit_plans), (*db)->last_event_seq(),
               !(*db)->read_only(),
               options.recovery == wal_recovery::salvage ? "salvage" : "strict");
  auto metrics = std::make_shared<service_metrics>();
  auto endpoint = metrics_endpoint::start(cfg.endpoints.metrics, *metrics);
  if (!endpoint) {
    spdlog::error("event=metrics_failed error=\"{}\"", render(endpoint.error()));
    return 1;
  }
  spdlog::info("event=metrics_listening address={} port={}", cfg.endpoints.metrics,
               (*endpoint)->port());
  metrics->config_generation().Set(1);
  std::shared_ptr<database> local{std::move(*db)};
  auto run = [&](const config& cfg, std::shared_ptr<database> db, std::shared_ptr<replica> ha) {
    caf::actor_system_config sys_cfg;
    register_loom_types(sys_cfg);
    use_live_scheduler(sys_cfg);
    caf::actor_system sys{sys_cfg};
    auto end = run_service(sys, cfg, options, std::move(db), metrics, std::move(ha));
    if (!end)
      spdlog::error("event=serve_failed error=\"{}\"", render(end.error()));
    return end;
  }; // every actor has stopped (the store flushed) once the system is gone
  caf::error failed;
  // The store owns its database alone while it runs: one that failed is closed and opened
  // again by it (a full disk), and a replica's next term opens the path anew.
  if (!cfg.ha) {
    if (auto end = run(cfg, std::move(local), nullptr); !end)
      failed = end.error();
  } else {
    failed = lead_when_elected(cfg, options, std::move(local), metrics, (*endpoint)->port(), run);
  }
  const int code = failed ? 1 : 0;
  spdlog::info("event=serve_stopped exit_code={}", code);
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  // Every actor is gone and the store closed (synced). What is left is the metrics endpoint's
  // web server, whose master thread polls in 2 s quanta (civetweb): waiting for it would more
  // than double the stop time, so the process ends here.
  std::_Exit(code);
}

} // namespace loom
