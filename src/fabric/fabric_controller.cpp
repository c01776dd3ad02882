#include "fabric/fabric_controller.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "fabric/controller_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "store/persist.hpp"

namespace loom {

namespace {

using controller_steps::self_ptr;

/// The plans committed before a restart, from each device's stored circuits.
void restore(self_ptr self, const std::vector<stored_record>& restored) {
  auto& st = self->state;
  for (auto& r : restored) {
    auto rec = decode_device_plan(r.value);
    auto dev = st.model->device_index(r.key);
    if (!rec || !dev) {
      spdlog::warn("event=fabric_restore_skipped device={}", r.key);
      continue;
    }
    for (auto& c : rec->circuits) {
      auto& o = st.owners[c.owner];
      if (!o.committed) {
        o.committed = circuit_plan{};
        o.committed->owner = c.owner;
        o.committed->stage = c.stage;
      }
      o.committed->version = c.version;
      o.committed->circuits.push_back({*dev, c.a, c.b});
      st.next_version = std::max(st.next_version, c.version + 1);
    }
  }
  for (auto& [owner, o] : st.owners) {
    std::sort(o.committed->circuits.begin(), o.committed->circuits.end());
    o.committed->layout = layout_of(*st.model, o.committed->circuits);
    st.usage->claim(*o.committed);
  }
  if (!st.owners.empty())
    spdlog::info("event=fabric_restored owners={} next_version={}", st.owners.size(),
                 st.next_version);
}

/// mFabric §5.1, App. B: a layer's first all-to-all, weighed by the monitor's prediction of its
/// load; without one (too early in a job), by the previous layer's load in this iteration (the
/// paper's "unchanged topology"), else uniformly.
fabric_intent with_predicted_weights(self_ptr self, fabric_intent intent) {
  auto it = self->state.monitors.find(intent.owner);
  if (it == self->state.monitors.end())
    return intent;
  auto& monitor = it->second;
  auto weights = monitor.predict(intent.iteration, intent.layer);
  if (!weights && intent.layer > 0)
    weights = monitor.observed(intent.iteration, intent.layer - 1);
  if (weights && weights->size() == intent.members.size())
    intent.receive_weights = std::move(*weights);
  return intent;
}

caf::result<fabric_decision> take_intent(self_ptr self, fabric_intent intent,
                                         const commit_window& window) {
  if (intent.owner.empty())
    return make_error(errc::invalid_argument, "an intent needs an owner");
  for (auto& r : intent.members)
    if (r.server >= self->state.model->servers.size())
      return make_error(errc::invalid_argument,
                        fmt::format("intent of '{}' names server {}, the fabric has {}",
                                    intent.owner, r.server, self->state.model->servers.size()));
  if (intent.predicted)
    intent = with_predicted_weights(self, std::move(intent));
  self->state.owners[intent.owner].intent = intent;
  return controller_steps::try_commit(self, intent.owner, window);
}

/// App. H: an operator or a driver reports a failed port (device id, duplex port).
caf::result<std::vector<std::string>> mask_port(self_ptr self, const std::string& device,
                                                uint32_t port) {
  auto& st = self->state;
  auto dev = st.model->device_index(device);
  if (!dev || port < 1 || port > st.model->devices[*dev].ports)
    return make_error(errc::invalid_argument,
                      fmt::format("no port {} on device '{}'", port, device));
  auto promise = self->make_response_promise<std::vector<std::string>>();
  controller_steps::mask(
    self, *dev, port,
    [promise](std::vector<std::string> owners) mutable { promise.deliver(std::move(owners)); },
    [promise](caf::error err) mutable { promise.deliver(std::move(err)); });
  return promise;
}

/// RFabric §5.4 (i): a failed server's NIC links stop counting and its ranks carry nothing; the
/// owners with ranks or circuits on it re-plan at their next window, and again when it is back.
std::vector<std::string> server_status(self_ptr self, const std::string& node, bool failed) {
  auto& st = self->state;
  auto server = st.model->server_index(node);
  if (!server)
    return {}; // not part of the fabric
  if (failed)
    st.model->fail_server(*server);
  else
    st.model->recover_server(*server);
  auto on_server = [&](const fabric_controller_state::owner_state& o) {
    if (o.serving && std::any_of(o.serving->members.begin(), o.serving->members.end(),
                                 [&](const rank_ref& r) { return r.server == *server; }))
      return true;
    auto ports = plan_ports(*o.committed);
    return std::any_of(ports.begin(), ports.end(), [&](const ocs_port& p) {
      auto& role = st.model->role(p);
      return role.kind == port_role::nic && st.model->nic_links[role.index].server == *server;
    });
  };
  std::vector<std::string> affected;
  for (auto& [owner, o] : st.owners) {
    if (!o.committed || !on_server(o))
      continue;
    if (!o.intent && o.serving)
      o.intent = o.serving;
    affected.push_back(owner);
  }
  spdlog::info("event=fabric_server_{} server={} owners_replanning={}",
               failed ? "failed" : "recovered", node, affected.size());
  return affected;
}

fabric_listing listing(const fabric_controller_state& st) {
  fabric_listing out;
  for (auto& [job, op] : st.opus) {
    opus_job_status s{job, op.spec.rails, op.orchestrator->current().str(),
                      op.orchestrator->first_port(), uint32_t(op.orchestrator->layout().ranks()),
                      op.orchestrator->fallen_back()};
    out.opus.push_back(std::move(s));
  }
  for (auto& [owner, o] : st.owners) {
    if (!o.committed)
      continue;
    fabric_plan_status s{owner, o.committed->stage, o.committed->version,
                         uint32_t(o.committed->circuits.size()), {}};
    std::set<std::string> devs;
    for (auto& c : o.committed->circuits)
      devs.insert(st.model->devices[c.device].id);
    s.devices.assign(devs.begin(), devs.end());
    out.plans.push_back(std::move(s));
  }
  return out;
}

} // namespace

fabric_controller_actor::behavior_type
fabric_controller(fabric_controller_actor::stateful_pointer<fabric_controller_state> self,
                  fabric_model model, std::map<std::string, ocs_driver_actor> drivers,
                  store_actor store, fabric_controller_config config, fabric_restored restored) {
  auto& st = self->state;
  st.model = std::move(model);
  st.templates.emplace(config.templates);
  st.usage.emplace(*st.model);
  for (auto& [id, d] : drivers)
    if (auto i = st.model->device_index(id))
      st.drivers[*i] = d;
  st.store = std::move(store);
  st.config = config;
  restore(self, restored.plans);
  controller_steps::restore_opus(self, restored.opus_jobs);
  controller_steps::device_metrics_at_zero(self);
  if (config.health_poll.count() > 0) {
    // Read every device back before trusting it, then poll it for as long as the service runs.
    for (auto& [dev, driver] : st.drivers)
      st.devices[dev].resync = true;
    self->send(self, poll_atom::value);
  }
  return {
    [self](intent_atom, const fabric_intent& intent, const commit_window& window) {
      return take_intent(self, intent, window);
    },
    [self](window_atom, const std::string& owner, const commit_window& window) {
      return controller_steps::try_commit(self, owner, window);
    },
    [self](mask_atom, const std::string& device, uint32_t port) {
      return mask_port(self, device, port);
    },
    [self](expert_atom, expert_load& load) {
      self->state.monitors[load.owner].record(load.iteration, load.layer,
                                              std::move(load.tokens));
      return ok_atom::value;
    },
    [self](node_atom, const std::string& node, bool failed) {
      return server_status(self, node, failed);
    },
    [self](plans_atom) { return listing(self->state); },
    [self](get_atom, const std::string& owner) {
      auto it = self->state.owners.find(owner);
      return it != self->state.owners.end() && it->second.committed
               ? it->second.committed->layout
               : circuit_layout{};
    },
    [self](opus_atom, const opus_job& job) { return controller_steps::register_opus(self, job); },
    [self](topo_write_atom, const std::string& job, const topo_write& w) {
      return controller_steps::topo_write_to(self, job, w);
    },
    [self](opus_atom, cancel_atom, const std::string& job) {
      return controller_steps::end_opus(self, job);
    },
    [self](poll_atom) {
      controller_steps::poll_devices(self);
      self->delayed_send(self, self->state.config.health_poll, poll_atom::value);
    },
    [self](deliver_atom, uint64_t token) {
      auto& waits = self->state.link_waits;
      if (auto it = waits.find(token); it != waits.end()) {
        it->second.promise.deliver(it->second.decision);
        waits.erase(it);
      }
    },
  };
}

} // namespace loom
