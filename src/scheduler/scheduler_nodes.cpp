// Nodes out of service. WEAVE isolates faults per job (§5.3): a node that fails takes down the
// jobs pinned to it (rollout on it, or training in the group that trains on it), which leave
// their groups as failed (their frameworks submit them again: new arrivals); the others go on.
// Algorithm 1 offers the node to nobody until an operator says it is back, and the fabric
// re-materialises connectivity around the server (RFabric §5.4 (i)). The outage is durable
// before anyone hears of it, and a restart keeps the node out.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/scheduler_steps.hpp"
#include "store/persist.hpp"

namespace loom::scheduler_steps {

namespace {

struct node_ref {
  bool rollout = true;
  int index = 0;
};

std::optional<node_ref> find_node(const placement_engine& engine, const std::string& id) {
  for (bool rollout : {true, false}) {
    auto& pool = rollout ? engine.rollout_pool() : engine.training_pool();
    for (size_t i = 0; i < pool.size(); ++i)
      if (pool[i].id == id)
        return node_ref{rollout, int(i)};
  }
  return std::nullopt;
}

/// Tells the fabric the server failed or is back; `done` gets the owners that re-plan.
void tell_fabric(scheduler_ptr self, const std::string& node, bool failed,
                 std::function<void(std::vector<std::string>)> done) {
  auto& fabric = self->state.config.fabric;
  if (!fabric) {
    done({});
    return;
  }
  self->request(fabric, caf::infinite, node_atom::value, node, failed)
    .then([done](std::vector<std::string>& owners) { done(std::move(owners)); },
          [done, node](caf::error& err) {
            spdlog::error("event=fabric_node_report_failed node={} error=\"{}\"", node,
                          render(err));
            done({});
          });
}

/// The jobs pinned to a failed node fail (each durable), and the fabric hears of it.
void isolate(scheduler_ptr self, const std::string& node, const std::string& reason,
             std::function<void(node_outcome)> done) {
  auto ref = find_node(*self->state.engine, node);
  auto jobs = self->state.engine->jobs_on(ref->rollout, ref->index);
  struct join {
    size_t left = 0;
    node_outcome outcome;
    std::function<void(node_outcome)> done;
  };
  auto j = std::make_shared<join>();
  j->left = jobs.size() + 1;
  j->done = std::move(done);
  auto finish = [j] {
    if (--j->left > 0)
      return;
    std::sort(j->outcome.failed_jobs.begin(), j->outcome.failed_jobs.end());
    j->done(std::move(j->outcome));
  };
  const auto why = fmt::format("node {} failed: {}", node, reason);
  for (auto& job : jobs)
    depart(self, job, job_state::failed, why, [j, finish, job](caf::error err) {
      if (!err)
        j->outcome.failed_jobs.push_back(job);
      finish();
    });
  tell_fabric(self, node, true, [j, finish](std::vector<std::string> owners) {
    j->outcome.replanning = std::move(owners);
    finish();
  });
}

/// Marks the node in the engine and in the list the meta record keeps.
void mark(scheduler_ptr self, const node_ref& ref, const node_report& r) {
  auto& st = self->state;
  st.engine->set_failed(ref.rollout, ref.index, r.failed);
  if (r.failed)
    st.failed_nodes[r.node] = r.reason;
  else
    st.failed_nodes.erase(r.node);
}

} // namespace

caf::result<node_outcome> report_node(scheduler_ptr self, const node_report& report) {
  auto& st = self->state;
  auto ref = find_node(*st.engine, report.node);
  if (!ref)
    return make_error(errc::not_found, fmt::format("no node '{}' in the cluster", report.node));
  node_report r = report;
  if (r.failed && r.reason.empty())
    r.reason = "reported failed";
  auto before = st.failed_nodes;
  mark(self, *ref, r);
  write_batch batch;
  batch.sync = st.config.sync_writes;
  batch.records.push_back(meta_write(st));
  loom_event event{r.failed ? event_kind::node_failed : event_kind::node_recovered, r.node,
                   r.failed ? fmt::format("pool={} reason=\"{}\"",
                                          ref->rollout ? "rollout" : "training", r.reason)
                            : fmt::format("pool={}", ref->rollout ? "rollout" : "training")};
  auto rp = self->make_response_promise<node_outcome>();
  persist(
    self, st.store, std::move(batch), std::move(event),
    [self, rp, r]() mutable {
      if (r.failed) {
        isolate(self, r.node, r.reason, [rp](node_outcome o) mutable { rp.deliver(std::move(o)); });
        return;
      }
      tell_fabric(self, r.node, false, [rp](std::vector<std::string> owners) mutable {
        rp.deliver(node_outcome{{}, std::move(owners)});
      });
    },
    [self, rp, ref = *ref, r, before](caf::error err) mutable {
      // Not durable, so not decided: the node stays as it was.
      self->state.failed_nodes = before;
      self->state.engine->set_failed(ref.rollout, ref.index, before.count(r.node) > 0);
      rp.deliver(std::move(err));
    });
  return rp;
}

void restore_failed_nodes(scheduler_ptr self, const std::map<std::string, std::string>& failed) {
  for (auto& [node, reason] : failed) {
    auto ref = find_node(*self->state.engine, node);
    if (!ref) {
      spdlog::warn("event=restore_problem reason=\"failed node '{}' is not in the cluster\"", node);
      continue;
    }
    mark(self, *ref, {node, true, reason});
  }
}

void isolate_failed_nodes(scheduler_ptr self) {
  for (auto& [node, reason] : self->state.failed_nodes)
    // An init-capture: clang 14 cannot capture a structured binding.
    isolate(self, node, reason, [name = node](const node_outcome& o) {
      spdlog::warn("event=node_out_of_service node={} failed_jobs={} owners_replanning={}", name,
                   o.failed_jobs.size(), o.replanning.size());
    });
}

} // namespace loom::scheduler_steps
