#include "fabric/fabric_controller.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.hpp"
#include "fabric/broadcast.hpp"
#include "loom.pb.h"

namespace loom {

namespace {

using self_ptr = fabric_controller_actor::stateful_pointer<fabric_controller_state>;
using promises = std::vector<caf::typed_response_promise<topo_ack>>;

int64_t now_ns(self_ptr self) {
  return self->clock().now().time_since_epoch().count();
}

/// What a finished fan-out of diffs reports: the first error, if any, and the slowest apply.
struct apply_outcome {
  std::optional<std::string> error;
  double latency_s = 0;
};

xc_diff inverse(const xc_diff& d) {
  return {d.adds, d.removes};
}

/// Applies every device's diff at once; when one fails, the devices that took theirs are
/// rolled back, so the fabric is left as it was.
void apply_all(self_ptr self, const std::map<uint32_t, xc_diff>& diffs,
               std::function<void(apply_outcome)> done) {
  struct join {
    size_t left = 0;
    apply_outcome outcome;
    std::vector<std::pair<uint32_t, xc_diff>> applied;
  };
  auto j = std::make_shared<join>();
  j->left = diffs.size();
  auto& st = self->state;
  auto finish = [self, j, done] {
    if (--j->left > 0)
      return;
    if (j->outcome.error)
      for (auto& [dev, diff] : j->applied)
        self->request(self->state.drivers.at(dev), self->state.config.apply_timeout,
                      apply_atom::value, inverse(diff))
          .then([](const apply_report&) {},
                [self, dev = dev](caf::error& err) {
                  spdlog::error("event=fabric_rollback_failed device={} error=\"{}\"",
                                self->state.model->devices[dev].id, render(err));
                });
    done(j->outcome);
  };
  if (diffs.empty()) {
    done({});
    return;
  }
  for (auto& [dev, diff] : diffs) {
    auto it = st.drivers.find(dev);
    if (it == st.drivers.end()) {
      j->outcome.error = fmt::format("no driver for {}", st.model->devices[dev].id);
      finish();
      continue;
    }
    self->request(it->second, st.config.apply_timeout, apply_atom::value, diff)
      .then(
        [j, finish, dev = dev, diff = diff](const apply_report& r) {
          j->applied.emplace_back(dev, diff);
          j->outcome.latency_s = std::max(j->outcome.latency_s, double(r.latency_ns) / 1e9);
          finish();
        },
        [self, j, finish, dev = dev](caf::error& err) {
          if (!j->outcome.error)
            j->outcome.error = fmt::format("{}: {}", self->state.model->devices[dev].id,
                                           render(err));
          finish();
        });
  }
}

/// Every touched device's circuits, across owners, as stored records.
std::vector<record_write> device_records(self_ptr self, const std::set<uint32_t>& devices) {
  auto& st = self->state;
  std::map<uint32_t, v1::CircuitPlan> out;
  for (auto d : devices) {
    auto& rec = out[d];
    rec.set_device(st.model->devices[d].id);
  }
  for (auto& [owner, o] : st.owners) {
    if (!o.committed)
      continue;
    for (auto& c : o.committed->circuits) {
      auto it = out.find(c.device);
      if (it == out.end())
        continue;
      auto* pc = it->second.add_circuits();
      pc->set_a(c.a);
      pc->set_b(c.b);
      pc->set_owner(owner);
      pc->set_version(o.committed->version);
      pc->set_stage(std::string{to_string(o.committed->stage)});
      it->second.set_version(std::max(it->second.version(), o.committed->version));
      it->second.set_intent(std::string{to_string(o.committed->stage)});
    }
  }
  std::vector<record_write> writes;
  for (auto& [d, rec] : out) {
    std::vector<physical_circuit> on;
    for (auto& c : rec.circuits())
      on.push_back({d, c.a(), c.b()});
    for (auto& x : device_cross_connects(*st.model, on, d)) {
      auto* xc = rec.add_cross_connects();
      xc->set_in_port(x.in);
      xc->set_out_port(x.out);
    }
    writes.push_back({record_kind::circuit_plans, rec.device(), rec.SerializeAsString(), false});
  }
  return writes;
}

/// Writes the batch (durably when configured), then runs `then`; a store error is answered.
template <class Promise, class Then>
void persist(self_ptr self, write_batch batch, Promise promise, Then then) {
  batch.sync = self->state.config.sync_writes;
  self->request(self->state.store, caf::infinite, write_atom::value, std::move(batch))
    .then([then](uint64_t) mutable { then(); },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
}

std::optional<fabric_stage> parse_stage(const std::string& s) {
  for (auto x : {fabric_stage::train_compute, fabric_stage::train_grad_sync, fabric_stage::gen,
                 fabric_stage::weight_sync})
    if (to_string(x) == s)
      return x;
  return std::nullopt;
}

/// Materialises the owner's pending intent on the fabric's tiers.
materialized materialize(self_ptr self, const std::string& owner, const fabric_intent& intent) {
  auto& st = self->state;
  auto& tpl = st.templates->get(*st.model, intent);
  auto flows = planned_flows(*st.model, intent);
  const circuit_plan* prev = st.owners[owner].committed ? &*st.owners[owner].committed : nullptr;
  if (st.model->kind != fabric_kind::mfabric)
    return materialize_plan(*st.model, tpl, aggregate_demand(*st.model, flows), *st.usage, owner,
                            prev);
  // mFabric: one regional plan per PoD the intent spans (§4.2: isolated regions).
  materialized all;
  all.plan = circuit_plan{};
  all.plan->owner = owner;
  all.plan->stage = intent.stage;
  for (uint32_t p = 0; p < st.model->pods.size(); ++p) {
    if (!tpl.spans(p))
      continue;
    auto r = materialize_regional(*st.model, p, server_demand(*st.model, p, flows), *st.usage,
                                  owner, prev);
    all.allocator_steps += r.allocator_steps;
    if (!r.plan)
      return r;
    all.plan->circuits.insert(all.plan->circuits.end(), r.plan->circuits.begin(),
                              r.plan->circuits.end());
    all.plan->layout.agg.resize(st.model->pods.size());
    all.plan->layout.agg[p] = r.plan->layout.agg[p];
  }
  std::sort(all.plan->circuits.begin(), all.plan->circuits.end());
  return all;
}

caf::result<fabric_decision> try_commit(self_ptr self, const std::string& owner,
                                        const commit_window& window) {
  auto& st = self->state;
  auto& o = st.owners[owner];
  fabric_decision d;
  d.owner = owner;
  if (o.committed) {
    d.version = o.committed->version;
    d.circuits = uint32_t(o.committed->circuits.size());
  }
  if (!o.intent) {
    d.outcome = "unchanged";
    return d;
  }
  if (o.busy) {
    d.outcome = "deferred";
    d.reason = "a commit of this owner is in flight";
    return d;
  }
  auto intent = *o.intent;
  auto m = materialize(self, owner, intent);
  auto promise = self->make_response_promise<fabric_decision>();
  auto tell = [self, promise, owner](fabric_decision d, std::string kind) mutable {
    write_batch batch;
    batch.events.push_back(
      encode_event(now_ns(self), kind, owner, d.reason.empty() ? d.outcome : d.reason));
    persist(self, std::move(batch), promise, [self, promise, d, kind, owner]() mutable {
      spdlog::info("event={} owner={} version={} reason=\"{}\"", kind, owner, d.version,
                   d.reason);
      if (auto& m = self->state.config.metrics)
        m->ocs_plans(d.outcome).Increment();
      promise.deliver(d);
    });
  };
  if (!m.plan) {
    // Alg. 2 line 7: keep the last plan; the intent is retried at the next window.
    d.outcome = "kept";
    d.reason = m.rejection;
    tell(d, "fabric_plan_kept");
    return promise;
  }
  auto plan = std::move(*m.plan);
  std::vector<physical_circuit> before = o.committed ? o.committed->circuits
                                                     : std::vector<physical_circuit>{};
  auto diffs = plan_diff(*st.model, before, plan.circuits);
  if (diffs.empty()) {
    plan.version = o.committed ? o.committed->version : 0;
    o.committed = std::move(plan);
    o.serving = intent;
    o.intent.reset();
    d.outcome = "unchanged";
    promise.deliver(d);
    return promise;
  }
  for (auto& [dev, diff] : diffs) {
    d.reconfig_s = std::max(d.reconfig_s, st.model->devices[dev].reconfig_s);
    d.changed += uint32_t(diff.removes.size() + diff.adds.size());
  }
  auto window_ok = decide_commit(intent.stage, window, d.reconfig_s, st.config.safe_window_margin_s);
  if (!window_ok.commit) {
    d.outcome = "deferred";
    d.reason = window_ok.reason;
    tell(d, "fabric_plan_deferred");
    return promise;
  }
  d.exposed_s = window_ok.exposed_s;
  plan.version = st.next_version++;
  // Reserve the ports now: a concurrent owner must not plan onto them.
  if (o.committed)
    st.usage->release(*o.committed);
  st.usage->claim(plan);
  o.busy = true;
  std::set<uint32_t> touched;
  for (auto& [dev, diff] : diffs)
    touched.insert(dev);
  apply_all(self, diffs, [self, promise, owner, plan, intent, d, touched,
                          tell](apply_outcome out) mutable {
    auto& st = self->state;
    auto& o = st.owners[owner];
    o.busy = false;
    if (out.error) {
      st.usage->release(plan);
      if (o.committed)
        st.usage->claim(*o.committed);
      d.outcome = "kept";
      d.reason = fmt::format("commit failed, previous plan kept: {}", *out.error);
      tell(d, "fabric_commit_failed");
      return;
    }
    o.committed = plan;
    o.serving = intent;
    o.intent.reset();
    d.outcome = "committed";
    d.version = plan.version;
    d.circuits = uint32_t(plan.circuits.size());
    d.reconfig_s = std::max(d.reconfig_s, out.latency_s);
    write_batch batch;
    batch.records = device_records(self, touched);
    batch.events.push_back(encode_event(
      now_ns(self), "fabric_committed", owner,
      fmt::format("v{} {} circuits on {} devices, {} cross-connects changed ({})", plan.version,
                  plan.circuits.size(), touched.size(), d.changed, to_string(plan.stage))));
    persist(self, std::move(batch), promise, [self, promise, d, owner]() mutable {
      if (auto& m = self->state.config.metrics)
        m->ocs_plans("committed").Increment();
      spdlog::info("event=fabric_committed owner={} version={} circuits={} changed={} "
                   "reconfig_ms={:.1f}",
                   owner, d.version, d.circuits, d.changed, d.reconfig_s * 1e3);
      promise.deliver(d);
    });
  });
  return promise;
}

// -- Opus ------------------------------------------------------------------------------------

/// The cross-connects of some stages' sub-mappings on one rail of R ranks, on a P-port switch.
std::vector<cross_connect> rail_mapping(const opus_layout& layout, const topo_id& id,
                                        const std::vector<int>& stages, uint32_t ports) {
  std::vector<cross_connect> out;
  const uint32_t ranks = uint32_t(layout.ranks());
  for (int s : stages)
    for (auto x : submapping(layout, id, s))
      out.push_back({x.in, x.out - ranks + ports});
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> all_stages(const opus_layout& layout) {
  std::vector<int> s(size_t(layout.pp));
  for (int i = 0; i < layout.pp; ++i)
    s[size_t(i)] = i;
  return s;
}

xc_diff mapping_diff(std::vector<cross_connect> from, std::vector<cross_connect> to) {
  xc_diff d;
  std::set_difference(from.begin(), from.end(), to.begin(), to.end(), std::back_inserter(d.removes));
  std::set_difference(to.begin(), to.end(), from.begin(), from.end(), std::back_inserter(d.adds));
  return d;
}

void deliver_all(promises& ps, const topo_ack& ack) {
  for (auto& p : ps)
    p.deliver(ack);
  ps.clear();
}

void run_opus_queue(self_ptr self, const std::string& job, int attempt = 0) {
  auto& st = self->state;
  auto& op = st.opus.at(job);
  if ((op.busy && attempt == 0) || op.queue.empty())
    return;
  op.busy = true;
  auto t = op.queue.front().first;
  std::map<uint32_t, xc_diff> diffs;
  for (auto& rail : op.rails) {
    auto dev = *st.model->device_index(rail);
    auto ports = st.model->devices[dev].ports;
    diffs[dev] = mapping_diff(rail_mapping(op.layout, t.from, t.reprogram, ports),
                              rail_mapping(op.layout, t.to, t.reprogram, ports));
  }
  apply_all(self, diffs, [self, job, t, attempt](apply_outcome out) {
    auto& st = self->state;
    auto& op = st.opus.at(job);
    if (out.error && attempt < st.config.max_retries) {
      spdlog::warn("event=opus_retry job={} attempt={} error=\"{}\"", job, attempt + 1,
                   *out.error);
      run_opus_queue(self, job, attempt + 1);
      return;
    }
    auto [transition, waiting] = std::move(op.queue.front());
    op.queue.pop_front();
    std::string kind = "opus_reconfigured";
    std::string detail = fmt::format("{} -> {} (stages", t.from.str(), t.to.str());
    for (int s : t.reprogram)
      detail += fmt::format(" {}", s);
    detail += ")";
    if (out.error) {
      // Persistent failure (Opus §4.2): a static giant ring over every rank of each rail.
      op.fallback = true;
      kind = "opus_fallback";
      detail = fmt::format("giant ring after {} attempts: {}", attempt + 1, *out.error);
      std::map<uint32_t, xc_diff> ring;
      for (auto& rail : op.rails) {
        auto dev = *st.model->device_index(rail);
        auto ports = st.model->devices[dev].ports;
        uint32_t r = uint32_t(op.layout.ranks());
        std::vector<cross_connect> giant;
        for (uint32_t i = 0; i < r; ++i)
          giant.push_back({i + 1, ports + (i + 1) % r + 1});
        ring[dev] = mapping_diff(rail_mapping(op.layout, op.controller->current(),
                                              all_stages(op.layout), ports),
                                 giant);
      }
      apply_all(self, ring, [job](apply_outcome r) {
        if (r.error)
          spdlog::error("event=opus_fallback_failed job={} error=\"{}\"", job, *r.error);
      });
    } else {
      op.controller->confirm(transition);
    }
    topo_ack ack{op.controller->current().str(), op.fallback};
    write_batch batch;
    batch.events.push_back(encode_event(now_ns(self), kind, job, detail));
    batch.sync = st.config.sync_writes;
    self->request(st.store, caf::infinite, write_atom::value, std::move(batch))
      .then(
        [self, job, waiting, ack, kind, detail](uint64_t) mutable {
          spdlog::info("event={} job={} detail=\"{}\"", kind, job, detail);
          deliver_all(waiting, ack);
          auto& op = self->state.opus.at(job);
          op.busy = false;
          if (op.fallback)
            while (!op.queue.empty()) {
              deliver_all(op.queue.front().second, ack);
              op.queue.pop_front();
            }
          run_opus_queue(self, job);
        },
        [self, job, waiting](caf::error& err) mutable {
          for (auto& p : waiting)
            p.deliver(err);
          self->state.opus.at(job).busy = false;
          run_opus_queue(self, job);
        });
  });
}

void restore(self_ptr self, const std::vector<stored_record>& restored) {
  auto& st = self->state;
  for (auto& r : restored) {
    v1::CircuitPlan rec;
    auto dev = st.model->device_index(r.key);
    if (!rec.ParseFromString(r.value) || !dev) {
      spdlog::warn("event=fabric_restore_skipped device={}", r.key);
      continue;
    }
    for (auto& c : rec.circuits()) {
      auto& o = st.owners[c.owner()];
      if (!o.committed) {
        o.committed = circuit_plan{};
        o.committed->owner = c.owner();
        o.committed->stage = parse_stage(c.stage()).value_or(fabric_stage::train_compute);
      }
      o.committed->version = c.version();
      o.committed->circuits.push_back({*dev, c.a(), c.b()});
      st.next_version = std::max(st.next_version, c.version() + 1);
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

} // namespace

fabric_controller_actor::behavior_type
fabric_controller(fabric_controller_actor::stateful_pointer<fabric_controller_state> self,
                  fabric_model model, std::map<std::string, ocs_driver_actor> drivers,
                  store_actor store, fabric_controller_config config,
                  std::vector<stored_record> restored) {
  auto& st = self->state;
  st.model = std::move(model);
  st.templates.emplace(config.templates);
  st.usage.emplace(*st.model);
  for (auto& [id, d] : drivers)
    if (auto i = st.model->device_index(id))
      st.drivers[*i] = d;
  st.store = std::move(store);
  st.config = config;
  restore(self, restored);
  return {
    [self](intent_atom, const fabric_intent& intent,
           const commit_window& window) -> caf::result<fabric_decision> {
      if (intent.owner.empty())
        return make_error(errc::invalid_argument, "an intent needs an owner");
      for (auto& r : intent.members)
        if (r.server >= self->state.model->servers.size())
          return make_error(errc::invalid_argument,
                            fmt::format("intent of '{}' names server {}, the fabric has {}",
                                        intent.owner, r.server,
                                        self->state.model->servers.size()));
      self->state.owners[intent.owner].intent = intent;
      return try_commit(self, intent.owner, window);
    },
    [self](window_atom, const std::string& owner,
           const commit_window& window) -> caf::result<fabric_decision> {
      return try_commit(self, owner, window);
    },
    [self](mask_atom, const std::string& device,
           uint32_t port) -> caf::result<std::vector<std::string>> {
      auto& st = self->state;
      auto dev = st.model->device_index(device);
      if (!dev || port < 1 || port > st.model->devices[*dev].ports)
        return make_error(errc::invalid_argument,
                          fmt::format("no port {} on device '{}'", port, device));
      ocs_port p{*dev, port};
      st.model->mask(p);
      // App. H: the owners whose circuits use the port re-plan around it at their next window.
      std::vector<std::string> affected;
      for (auto& [owner, o] : st.owners) {
        if (!o.committed)
          continue;
        auto ports = plan_ports(*o.committed);
        if (std::find(ports.begin(), ports.end(), p) == ports.end())
          continue;
        if (!o.intent && o.serving)
          o.intent = o.serving;
        affected.push_back(owner);
      }
      auto promise = self->make_response_promise<std::vector<std::string>>();
      write_batch batch;
      batch.events.push_back(encode_event(now_ns(self), "ocs_port_masked", device,
                                          fmt::format("port {}, {} owners re-plan", port,
                                                      affected.size())));
      persist(self, std::move(batch), promise, [promise, affected, device, port]() mutable {
        spdlog::warn("event=ocs_port_masked device={} port={} owners={}", device, port,
                     affected.size());
        promise.deliver(affected);
      });
      return promise;
    },
    [self](plans_atom) {
      std::vector<fabric_plan_status> out;
      auto& st = self->state;
      for (auto& [owner, o] : st.owners) {
        if (!o.committed)
          continue;
        fabric_plan_status s{owner, std::string{to_string(o.committed->stage)},
                             o.committed->version, uint32_t(o.committed->circuits.size()), {}};
        std::set<std::string> devs;
        for (auto& c : o.committed->circuits)
          devs.insert(st.model->devices[c.device].id);
        s.devices.assign(devs.begin(), devs.end());
        out.push_back(std::move(s));
      }
      return out;
    },
    [self](get_atom, const std::string& owner) {
      auto it = self->state.owners.find(owner);
      return it != self->state.owners.end() && it->second.committed
               ? it->second.committed->layout
               : circuit_layout{};
    },
    [self](opus_atom, const opus_job& job) -> caf::result<ok_atom> {
      auto& st = self->state;
      fabric_controller_state::opus_state op;
      op.layout = opus_layout{job.pp, job.symmetrical};
      op.rails = job.rails;
      if (job.pp < 1 || job.initial.size() != size_t(job.pp)
          || job.initial.find_first_not_of("0123456789") != std::string::npos)
        return make_error(errc::invalid_argument,
                          fmt::format("job '{}': initial topo_id '{}' needs {} digits", job.job,
                                      job.initial, job.pp));
      for (auto& r : job.rails) {
        auto dev = st.model->device_index(r);
        if (!dev || st.model->devices[*dev].tier != ocs_tier::rail)
          return make_error(errc::invalid_argument, fmt::format("'{}' is not a rail OCS", r));
        if (st.model->devices[*dev].ports < uint32_t(op.layout.ranks()))
          return make_error(errc::invalid_argument,
                            fmt::format("rail '{}' has {} ports for {} ranks", r,
                                        st.model->devices[*dev].ports, op.layout.ranks()));
      }
      op.controller.emplace(topo_id::parse(job.initial));
      // Program the starting topology on every rail, then answer.
      std::map<uint32_t, xc_diff> diffs;
      for (auto& r : job.rails) {
        auto dev = *st.model->device_index(r);
        diffs[dev].adds = rail_mapping(op.layout, op.controller->current(), all_stages(op.layout),
                                       st.model->devices[dev].ports);
      }
      st.opus[job.job] = std::move(op);
      auto promise = self->make_response_promise<ok_atom>();
      apply_all(self, diffs, [self, promise, job](apply_outcome out) mutable {
        if (out.error) {
          self->state.opus.erase(job.job);
          promise.deliver(make_error(errc::driver_refused, *out.error));
          return;
        }
        write_batch batch;
        batch.events.push_back(encode_event(now_ns(self), "opus_registered", job.job,
                                            fmt::format("topo_id {} on {} rails", job.initial,
                                                        job.rails.size())));
        persist(self, std::move(batch), promise,
                [promise]() mutable { promise.deliver(ok_atom::value); });
      });
      return promise;
    },
    [self](topo_write_atom, const std::string& job,
           const topo_write& w) -> caf::result<topo_ack> {
      auto& st = self->state;
      auto it = st.opus.find(job);
      if (it == st.opus.end())
        return make_error(errc::not_found, fmt::format("no Opus job '{}'", job));
      auto& op = it->second;
      if (w.stage < 0 || w.stage >= op.layout.pp || w.digit > op.layout.symmetrical.size()
          || w.group_size < 1)
        return make_error(errc::invalid_argument,
                          fmt::format("topo_write of '{}': stage {} digit {} group size {}", job,
                                      w.stage, int(w.digit), w.group_size));
      auto promise = self->make_response_promise<topo_ack>();
      auto key = std::make_pair(w.group, w.op_index);
      op.waiting[key].push_back(promise);
      if (op.fallback) {
        deliver_all(op.waiting[key], {op.controller->current().str(), true});
        op.waiting.erase(key);
        return promise;
      }
      auto t = op.controller->write(w);
      if (!t)
        return promise;
      auto ready = std::move(op.waiting[key]);
      op.waiting.erase(key);
      if (t->reprogram.empty()) {
        // O1: nothing to reprogram. Ordered behind transitions still being applied.
        if (op.queue.empty() && !op.busy) {
          op.controller->confirm(*t);
          deliver_all(ready, {op.controller->current().str(), false});
          return promise;
        }
      }
      op.queue.emplace_back(*t, std::move(ready));
      run_opus_queue(self, job);
      return promise;
    },
  };
}

} // namespace loom
