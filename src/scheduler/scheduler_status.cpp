// What the cluster scheduler tells operators: every job, every group with its turn order and
// own cost, and one job in detail with its executor's view (iterations, phase, why it waits).

#include <caf/all.hpp>

#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/scheduler_steps.hpp"

namespace loom::scheduler_steps {

namespace {

job_status status_of(const cluster_scheduler_state& st, const std::string& id,
                     const job_entry& e) {
  job_status s{id,          e.state, e.state == job_state::placed ? group_name(e.group) : "",
               e.job.slo,   e.job.solo_s(), e.reason,
               e.job.iterations > 0 ? e.job.iterations + e.job.iterations_before : 0};
  s.member.job = id;
  if (auto p = st.progress.find(id); p != st.progress.end())
    s.member.iterations_done = p->second.iterations_done;
  s.iterations_completed = e.state == job_state::placed
                             ? e.job.iterations_before + s.member.iterations_done
                             : e.iterations_done;
  return s;
}

} // namespace

std::vector<job_status> job_statuses(const cluster_scheduler_state& st, const std::string& after,
                                     uint32_t limit) {
  std::vector<job_status> out;
  for (auto it = after.empty() ? st.jobs.begin() : st.jobs.upper_bound(after);
       it != st.jobs.end() && out.size() < limit; ++it)
    out.push_back(status_of(st, it->first, it->second));
  return out;
}

scheduler_census census(const cluster_scheduler_state& st) {
  return {st.job_counts, st.engine->groups().size(), st.executors.size()};
}

std::vector<group_status> group_statuses(const cluster_scheduler_state& st) {
  const auto& engine = *st.engine;
  std::vector<group_status> out;
  for (auto& [id, g] : engine.groups()) {
    group_status s{group_name(id), {}, node_names(engine.rollout_pool(), g.rollout_nodes),
                   node_names(engine.training_pool(), g.training_nodes), g.is_saturated,
                   engine.group_cost_per_hour(id)};
    for (auto& m : g.members) { // in turn order (WEAVE §4.3: join order)
      s.jobs.push_back(m.job.id);
      auto p = st.progress.find(m.job.id);
      s.iterations_done.push_back(p == st.progress.end() ? 0 : p->second.iterations_done);
    }
    out.push_back(std::move(s));
  }
  return out;
}

caf::result<job_status> inspect_job(scheduler_ptr self, const std::string& id) {
  auto& st = self->state;
  auto it = st.jobs.find(id);
  if (it == st.jobs.end())
    return make_error(errc::not_found, fmt::format("no job '{}'", id));
  auto s = status_of(st, id, it->second);
  if (it->second.state != job_state::placed)
    return s;
  const auto& engine = *st.engine;
  auto& g = engine.groups().at(it->second.group);
  for (auto& m : g.members)
    if (m.job.id == id)
      s.rollout_nodes = node_names(engine.rollout_pool(), m.rollout_nodes);
  s.training_nodes = node_names(engine.training_pool(), g.training_nodes);
  auto rp = self->make_response_promise<job_status>();
  self->request(executor_for(self, it->second.group), caf::infinite, status_atom::value, id)
    .then(
      [rp, s](member_status m) mutable {
        s.member = std::move(m);
        rp.deliver(std::move(s));
      },
      [rp, s](caf::error&) mutable { rp.deliver(std::move(s)); });
  return rp;
}

} // namespace loom::scheduler_steps
