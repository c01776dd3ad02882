#include "replay/fabric_rl.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "drivers/ocs_driver.hpp"
#include "fabric/broadcast.hpp"
#include "fabric/fabric_controller.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/shape.hpp"
#include "metrics/metrics.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "replay/driver.hpp"
#include "replay/fabric_collectives.hpp"
#include "replay/report.hpp"
#include "replay/request.hpp"
#include "store/store_actor.hpp"

namespace loom::replay {

using json = nlohmann::json;

json time_json(double s) {
  return std::isfinite(s) ? json(round4(s)) : json(nullptr);
}

namespace {

struct period {
  std::string name;
  fabric_intent intent;
  window_kind window;
};

/// One owner: the job's stages take turns on the fabric (§5.2), each period's plan replacing
/// the last one's where they differ.
std::vector<period> rl_periods(const fabric_scenario& sc, const rl_section& rl) {
  const int gpus = sc.shape.gpus_per_server;
  auto rank = [&](int r) { return rank_ref{uint32_t(r / gpus), r % gpus}; };
  std::vector<parallel_dim> layout{{"EP", rl.ep}, {"DP", rl.dp}};
  std::vector<rank_ref> ep_groups;
  for (auto& g : domain_groups(layout, "EP", gpus))
    ep_groups.insert(ep_groups.end(), g.begin(), g.end());
  std::vector<rank_ref> dp_groups;
  for (auto& g : domain_groups(layout, "DP", gpus))
    dp_groups.insert(dp_groups.end(), g.begin(), g.end());
  std::vector<rank_ref> gen;
  for (int r = 0; r < rl.gen_ranks; ++r)
    gen.push_back(rank(rl.ep * rl.dp + r));
  std::vector<rank_ref> sync{rank(0)};
  sync.insert(sync.end(), gen.begin(), gen.end());
  return {
    {"train fwd/bwd", {"rl-job", fabric_stage::train_compute, {{primitive::all_to_all, 1}},
                       ep_groups, rl.gb_a2a * 1e9, uint32_t(rl.ep)},
     window_kind::stage_boundary},
    {"grad-sync", {"rl-job", fabric_stage::train_grad_sync, {{primitive::all_reduce, 1}},
                   dp_groups, rl.gb_grad * 1e9, uint32_t(rl.dp)},
     window_kind::stage_boundary},
    {"weight-sync", {"rl-job", fabric_stage::weight_sync, {{primitive::broadcast, 1}}, sync,
                     rl.gb_weights * 1e9, 0},
     window_kind::before_broadcast},
    {"gen", {"rl-job", fabric_stage::gen, {{primitive::all_to_all, 1}}, gen, rl.gb_a2a * 1e9, 0},
     window_kind::deployment_boundary},
  };
}

/// An emulated OCS per device, at its technology's delay (constant: the figures compare plans).
std::map<std::string, ocs_driver_actor> emulated_devices(caf::actor_system& sys,
                                                         const fabric_model& model,
                                                         uint64_t seed) {
  std::map<std::string, ocs_driver_actor> drivers;
  for (auto& d : model.devices) {
    emulated_ocs_config c;
    c.device = d.id;
    c.size = {d.ports, d.ports};
    c.latency = {d.reconfig_s * 1e3, d.reconfig_s * 1e3};
    c.seed = seed;
    drivers[d.id] = caf::actor_cast<ocs_driver_actor>(sys.spawn(emulated_ocs, c));
  }
  return drivers;
}

/// The plan's circuits per PoD's aggregation OCS and across PoDs, for the report's figure.
json circuits_by_tier(const circuit_layout& layout) {
  json out = json::object();
  auto total = [](const std::vector<circuit_count>& cs) {
    uint32_t n = 0;
    for (auto& c : cs)
      n += c.circuits;
    return n;
  };
  for (size_t pod = 0; pod < layout.agg.size(); ++pod)
    out[fmt::format("pod {} agg", pod)] = total(layout.agg[pod]);
  out["core"] = total(layout.core);
  return out;
}

struct rl_run {
  json periods = json::array();
  std::map<fabric_outcome, int> outcomes;
  size_t persisted = 0;
};

/// Every period of every iteration through the controller; the store's device records after.
caf::error run_periods(driver& drv, const fabric_model& model, std::unique_ptr<database> db,
                       const std::vector<period>& periods, int iterations, double window_s,
                       uint64_t seed, rl_run& run) {
  auto& sys = drv.system();
  auto store_handle = sys.spawn(store, std::shared_ptr<database>{std::move(db)},
                                std::make_shared<service_metrics>());
  auto drivers = emulated_devices(sys, model, seed);
  auto ctl = sys.spawn(fabric_controller, model, drivers, store_handle,
                       fabric_controller_config{}, fabric_restored{});
  auto stop = [&] {
    for (auto& [id, a] : drivers)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(ctl, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store_handle, caf::exit_reason::user_shutdown);
  };
  for (int it = 0; it < iterations; ++it)
    for (auto& p : periods) {
      auto d = request_now<fabric_decision>(drv, ctl, intent_atom::value, p.intent,
                                            commit_window{p.window, window_s});
      if (!d.value) {
        stop();
        return d.error;
      }
      auto layout = request_now<circuit_layout>(drv, ctl, get_atom::value, p.intent.owner);
      double comm = fabric_network(model, *layout.value).completion_s(planned_flows(model, p.intent));
      ++run.outcomes[d.value->outcome];
      run.periods.push_back({{"iteration", it},
                             {"period", p.name},
                             {"owner", p.intent.owner},
                             {"outcome", std::string{to_string(d.value->outcome)}},
                             {"reason", d.value->reason},
                             {"version", d.value->version},
                             {"circuits", d.value->circuits},
                             {"circuits_by_tier", circuits_by_tier(*layout.value)},
                             {"changed", d.value->changed},
                             {"reconfig_ms", round4(d.value->reconfig_s * 1e3)},
                             {"exposed_ms", round4(d.value->exposed_s * 1e3)},
                             {"comm_s", time_json(comm + d.value->exposed_s)}});
    }
  auto records = request_now<std::vector<stored_record>>(drv, store_handle, scan_atom::value,
                                                         record_kind::circuit_plans,
                                                         std::string{});
  run.persisted = records.value ? records.value->size() : 0;
  stop();
  return caf::none;
}

} // namespace

caf::expected<json> rl_json(const fabric_scenario& sc, const rl_section& rl,
                            const std::string& dir, std::string& summary) {
  auto shaped = make_rfabric(sc.shape);
  auto built = fabric_model::build(shaped.config, shaped.nodes);
  if (!built.value)
    return make_error(errc::invalid_config, built.error);
  auto db = open_scratch_store(dir + "/store/rl");
  if (!db)
    return db.error();
  rl_run run;
  {
    driver drv;
    if (auto err = run_periods(drv, *built.value, std::move(*db), rl_periods(sc, rl),
                               rl.iterations, rl.compute_s, sc.seed, run))
      return err;
  }
  auto count = [&](fabric_outcome o) { return run.outcomes[o]; };
  summary += fmt::format("RL iterations through the fabric controller: {} committed, {} "
                         "unchanged, {} deferred, {} kept; {} devices' plans persisted\n",
                         count(fabric_outcome::committed), count(fabric_outcome::unchanged),
                         count(fabric_outcome::deferred), count(fabric_outcome::kept),
                         run.persisted);
  return json{{"periods", run.periods},
              {"committed", count(fabric_outcome::committed)},
              {"unchanged", count(fabric_outcome::unchanged)},
              {"deferred", count(fabric_outcome::deferred)},
              {"kept", count(fabric_outcome::kept)},
              {"persisted_devices", run.persisted}};
}

} // namespace loom::replay
