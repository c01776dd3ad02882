// The fabric controller's commit path (RFabric §5.3 Alg. 2): materialise the owner's intent,
// diff it against the committed plan, check the window, apply through the drivers, persist the
// touched devices' circuits, answer.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <set>

#include "fabric/controller_steps.hpp"
#include "fabric/safe_window.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "store/persist.hpp"

namespace loom::controller_steps {

namespace {

xc_diff inverse(const xc_diff& d) {
  return {d.adds, d.removes};
}

void rollback(self_ptr self, const std::vector<std::pair<uint32_t, xc_diff>>& applied) {
  for (auto& [dev, diff] : applied)
    self->request(self->state.drivers.at(dev), self->state.config.apply_timeout,
                  apply_atom::value, inverse(diff))
      .then([](const apply_report&) {},
            [self, dev = dev](caf::error& err) {
              spdlog::error("event=fabric_rollback_failed device={} error=\"{}\"",
                            self->state.model->devices[dev].id, render(err));
            });
}

} // namespace

void apply_all(self_ptr self, const std::map<uint32_t, xc_diff>& diffs,
               std::function<void(apply_outcome)> done) {
  struct join {
    size_t left = 0;
    apply_outcome outcome;
    std::vector<std::pair<uint32_t, xc_diff>> applied;
  };
  if (diffs.empty()) {
    done({});
    return;
  }
  auto j = std::make_shared<join>();
  j->left = diffs.size();
  auto finish = [self, j, done] {
    if (--j->left > 0)
      return;
    if (j->outcome.error)
      rollback(self, j->applied);
    done(j->outcome);
  };
  auto& st = self->state;
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
          j->outcome.ready_s = std::max(j->outcome.ready_s, double(r.ready_ns) / 1e9);
          finish();
        },
        [self, j, finish, dev = dev](caf::error& err) {
          if (!j->outcome.error)
            j->outcome.error = fmt::format("{}: {}", self->state.model->devices[dev].id,
                                           render(err));
          apply_failed(self, dev, err);
          finish();
        });
  }
}

namespace {

using promise_t = caf::typed_response_promise<fabric_decision>;

/// Every touched device's circuits, across owners, as stored records.
std::vector<record_write> device_records(self_ptr self, const std::set<uint32_t>& devices) {
  auto& st = self->state;
  std::map<uint32_t, device_plan_record> out;
  for (auto d : devices)
    out[d].device = st.model->devices[d].id;
  for (auto& [owner, o] : st.owners) {
    if (!o.committed)
      continue;
    for (auto& c : o.committed->circuits) {
      auto it = out.find(c.device);
      if (it == out.end())
        continue;
      auto& rec = it->second;
      rec.circuits.push_back({c.a, c.b, owner, o.committed->version, o.committed->stage});
      if (o.committed->version >= rec.version) {
        rec.version = o.committed->version;
        rec.stage = o.committed->stage;
      }
    }
  }
  std::vector<record_write> writes;
  for (auto& [d, rec] : out) {
    std::vector<physical_circuit> on;
    for (auto& c : rec.circuits)
      on.push_back({d, c.a, c.b});
    rec.cross_connects = device_cross_connects(*st.model, on, d);
    writes.push_back({record_kind::circuit_plans, rec.device, encode_device_plan(rec), false});
  }
  return writes;
}

/// An outcome without a commit (kept, deferred, failed), made durable, counted and answered.
void record_outcome(self_ptr self, promise_t promise, const fabric_decision& d, event_kind kind) {
  write_batch batch;
  batch.sync = self->state.config.sync_writes;
  persist(
    self, self->state.store, std::move(batch),
    {kind, d.owner,
     fmt::format("outcome={} version={} reason=\"{}\"", d.outcome, d.version, d.reason)},
    [self, promise, d]() mutable {
      if (auto& m = self->state.config.metrics)
        m->ocs_plans(std::string{to_string(d.outcome)}).Increment();
      promise.deliver(d);
    },
    [promise](caf::error err) mutable { promise.deliver(std::move(err)); });
}

/// The decision as things stand: the owner's committed plan, if any.
fabric_decision standing(const std::string& owner,
                         const fabric_controller_state::owner_state& o) {
  fabric_decision d;
  d.owner = owner;
  if (o.committed) {
    d.version = o.committed->version;
    d.circuits = uint32_t(o.committed->circuits.size());
  }
  return d;
}

/// The apply is done: on success the plan is the owner's and the touched devices are stored
/// before the answer; on failure the previous plan is kept and its ports reclaimed.
void conclude_commit(self_ptr self, promise_t promise, circuit_plan plan,
                     const fabric_intent& intent, fabric_decision d,
                     const std::set<uint32_t>& touched, const apply_outcome& out) {
  auto& st = self->state;
  auto& o = st.owners[d.owner];
  o.busy = false;
  if (out.error) {
    st.usage->release(plan);
    if (o.committed)
      st.usage->claim(*o.committed);
    d.outcome = fabric_outcome::kept;
    d.reason = fmt::format("commit failed, previous plan kept: {}", *out.error);
    record_outcome(self, promise, d, event_kind::fabric_commit_failed);
    return;
  }
  d.outcome = fabric_outcome::committed;
  d.version = plan.version;
  d.circuits = uint32_t(plan.circuits.size());
  d.reconfig_s = std::max(d.reconfig_s, out.latency_s);
  d.reason = fmt::format("{} cross-connects changed on {} device{} in {:.1f} ms, {:.1f} ms of "
                         "it outside the window",
                         d.changed, touched.size(), touched.size() == 1 ? "" : "s",
                         d.reconfig_s * 1e3, d.exposed_s * 1e3);
  o.committed = std::move(plan);
  o.serving = intent;
  o.intent.reset();
  write_batch batch;
  batch.sync = st.config.sync_writes;
  batch.records = device_records(self, touched);
  persist(
    self, st.store, std::move(batch),
    {event_kind::fabric_committed, d.owner,
     fmt::format("version={} circuits={} devices={} changed={} stage={} reconfig_ms={:.1f}",
                 d.version, d.circuits, touched.size(), d.changed, o.committed->stage,
                 d.reconfig_s * 1e3)},
    [self, promise, d, link_up = out.ready_s - out.latency_s]() mutable {
      if (auto& m = self->state.config.metrics)
        m->ocs_plans("committed").Increment();
      answer_when_up(self, std::move(promise), d, link_up);
    },
    [promise](caf::error err) mutable { promise.deliver(std::move(err)); });
}

/// Reserves the plan's ports (a concurrent owner must not plan onto them) and applies it.
void commit(self_ptr self, promise_t promise, circuit_plan plan, const fabric_intent& intent,
            fabric_decision d, const std::map<uint32_t, xc_diff>& diffs) {
  auto& st = self->state;
  auto& o = st.owners[d.owner];
  plan.version = st.next_version++;
  if (o.committed)
    st.usage->release(*o.committed);
  st.usage->claim(plan);
  o.busy = true;
  std::set<uint32_t> touched;
  for (auto& [dev, diff] : diffs)
    touched.insert(dev);
  apply_all(self, diffs, [self, promise, plan, intent, d, touched](apply_outcome out) {
    conclude_commit(self, promise, plan, intent, d, touched, out);
  });
}

} // namespace

caf::result<fabric_decision> try_commit(self_ptr self, const std::string& owner,
                                        const commit_window& window) {
  auto& st = self->state;
  auto& o = st.owners[owner];
  auto d = standing(owner, o);
  if (!o.intent) {
    d.outcome = fabric_outcome::unchanged;
    d.reason = o.committed ? "no new intent: the committed plan stands"
                           : "no intent of this owner: nothing to commit";
    return d;
  }
  if (o.busy) {
    d.outcome = fabric_outcome::deferred;
    d.reason = "a commit of this owner is in flight";
    return d;
  }
  auto intent = *o.intent;
  const circuit_plan* previous = o.committed ? &*o.committed : nullptr;
  auto m = materialize_intent(*st.model, st.templates->get(*st.model, intent), intent, *st.usage,
                              previous);
  auto promise = self->make_response_promise<fabric_decision>();
  if (!m.plan) {
    // Alg. 2 line 7: keep the last plan; the intent is retried at the next window.
    d.outcome = fabric_outcome::kept;
    d.reason = m.rejection;
    record_outcome(self, promise, d, event_kind::fabric_plan_kept);
    return promise;
  }
  auto diffs = plan_diff(*st.model, previous ? previous->circuits : std::vector<physical_circuit>{},
                         m.plan->circuits);
  if (diffs.empty()) {
    m.plan->version = o.committed ? o.committed->version : 0;
    o.committed = std::move(*m.plan);
    o.serving = intent;
    o.intent.reset();
    d.outcome = fabric_outcome::unchanged;
    d.reason = "the intent's circuits are those already committed";
    promise.deliver(d);
    return promise;
  }
  for (auto& [dev, diff] : diffs) {
    d.reconfig_s = std::max(d.reconfig_s, st.model->devices[dev].reconfig_s);
    d.changed += uint32_t(diff.removes.size() + diff.adds.size());
  }
  if (auto down = unavailable(self, diffs); !down.empty()) {
    // The intent stays: it is served at the owner's first window after the device is back.
    d.outcome = fabric_outcome::kept;
    d.reason = "kept back: " + down;
    record_outcome(self, promise, d, event_kind::fabric_plan_kept);
    return promise;
  }
  auto allowed = decide_commit(intent.stage, window, d.reconfig_s, st.config.safe_window_margin_s);
  if (!allowed.commit) {
    d.outcome = fabric_outcome::deferred;
    d.reason = allowed.reason;
    record_outcome(self, promise, d, event_kind::fabric_plan_deferred);
    return promise;
  }
  d.exposed_s = allowed.exposed_s;
  commit(self, promise, std::move(*m.plan), intent, d, diffs);
  return promise;
}

} // namespace loom::controller_steps
