// The gateway as the executors' worker edge: a job joins (its workers' first acquire then
// stages it), permits answer waiting acquires, a job that leaves has its waiting requests
// answered. And requests for jobs the gateway has no executor for, answered with why.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/gateway_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/sync_plan.hpp"

namespace loom::gateway_steps {

group_executor_actor executor_of(self_ptr self, const std::string& job) {
  auto it = self->state.jobs.find(job);
  return it == self->state.jobs.end() ? group_executor_actor{} : it->second.executor;
}

void stage(self_ptr self, const std::string& job) {
  auto it = self->state.jobs.find(job);
  if (it == self->state.jobs.end() || !it->second.executor || it->second.staged)
    return;
  it->second.staged = true;
  self->send(it->second.executor, staged_atom::value, job);
}

void when_placed(self_ptr self, const std::string& job, const std::string& identity,
                 uint64_t rid, std::function<void()> placed, std::function<bool()> refused) {
  self->request(self->state.scheduler, caf::infinite, job_atom::value, job)
    .then(
      [=](const job_status& s) {
        if (s.state == job_state::placed || placed_again(s.state)) {
          placed();
          return;
        }
        if (refused())
          send_error(self, identity, rid, v1::ERROR_JOB_ENDED,
                     fmt::format("job '{}' is {}{}", job, s.state,
                                 s.reason.empty() ? "" : ": " + s.reason));
      },
      [=](caf::error& err) {
        if (refused())
          send_failure(self, identity, rid, err);
      });
}

void explain_wait(self_ptr self, const std::string& job, phase_kind phase,
                  const std::string& identity, uint64_t rid, bool in_turn_only) {
  auto executor = executor_of(self, job);
  if (!executor)
    return;
  self->request(executor, caf::infinite, status_atom::value, job)
    .then(
      [=](const member_status& m) {
        auto& st = self->state;
        if (!st.grants.waiting(job, phase, identity, rid))
          return; // granted or answered meanwhile
        if (in_turn_only && m.staged && m.phase != phase) {
          st.grants.withdraw(job, phase, identity, rid);
          send_error(self, identity, rid, v1::ERROR_RESTART_ITERATION,
                     fmt::format("job '{}' is at the {} phase of iteration {}, not {}: run the "
                                 "iteration again from its rollout",
                                 job, m.phase, m.iterations_done + 1, phase));
          return;
        }
        v1::Envelope e;
        auto* w = e.mutable_waiting();
        w->set_job(job);
        w->set_phase(wire::to_wire(phase));
        w->set_reason(m.waiting.empty() ? "its permit is on its way" : m.waiting);
        send_frame(self, identity, e);
      },
      [](caf::error&) {});
}

void job_joined(self_ptr self, const member_joined& m) {
  auto& link = self->state.jobs[m.job];
  link = job_link{caf::actor_cast<group_executor_actor>(self->current_sender())};
  spdlog::debug("event=job_linked job={} group={}", m.job, m.group);
  // Workers already waiting for a phase have the job's state staged. A job placed again
  // starts its iteration over in the new group: a driver that waited (for the old group) for
  // a phase that is not its turn now is told to run the iteration again from its rollout.
  auto& st = self->state;
  if (!st.grants.waiting(m.job))
    return;
  stage(self, m.job);
  for (auto& [phase, w] : st.grants.waiters(m.job)) {
    const auto* id = st.sessions.worker_of(w.identity);
    const auto* s = id ? st.sessions.find(*id) : nullptr;
    explain_wait(self, m.job, phase, w.identity, w.request_id,
                 s && s->role == worker_role::driver);
  }
}

/// The executor's permit: it answers the workers waiting for it, or waits for them.
void permit(self_ptr self, const phase_grant& g) {
  auto& st = self->state;
  spdlog::info("event=phase_granted job={} phase={} iteration={} gpus={} switch_s={:.2f} cold={} "
               "profiling={}",
               g.job, g.phase, g.iteration, g.gpus, g.switch_s, g.cold, g.profiling);
  auto now = self->clock().now();
  for (auto& w : st.grants.grant(g)) {
    st.metrics->grant_latency().Observe(std::chrono::duration<double>(now - w.since).count());
    reply(self, w.identity, w.request_id,
          [&](v1::Envelope& e) { fill_grant(self, *e.mutable_phase_grant(), g); });
  }
}

void fill_grant(self_ptr self, v1::PhaseGrant& out, const phase_grant& g) {
  wire::fill(out, g);
  if (g.phase == phase_kind::training)
    return;
  sync_peer source; // the trainer's data channel; a driver's if no trainer has one
  std::vector<sync_peer> receivers;
  for (auto& [id, s] : self->state.sessions.of_job(g.job)) {
    if (s->role == worker_role::rollout)
      receivers.push_back({id, s->node, s->data_address});
    else if (!s->data_address.empty()
             && (source.address.empty() || s->role == worker_role::train))
      source = {id, s->node, s->data_address};
  }
  for (auto& hop : sync_route(source, std::move(receivers), self->state.config.pods)) {
    auto* h = out.add_sync_route();
    h->set_worker(hop.worker);
    h->set_address(hop.address);
    h->set_source(hop.source);
  }
}

/// The job left its group. Placed again elsewhere (drifted, moved), its waiting workers wait for
/// the new group; otherwise they are answered, and every worker of the job hears so.
void job_left(self_ptr self, const std::string& job, job_state why) {
  auto& st = self->state;
  auto link = st.jobs.find(job);
  // The old group's word may come after the new group's join and permits (two actors, no
  // order between them): the job's permits and waiting workers are then the new group's.
  const bool superseded =
    link != st.jobs.end() && link->second.executor
    && caf::actor_cast<caf::actor_addr>(link->second.executor) != self->current_sender();
  if (link != st.jobs.end() && !superseded)
    st.jobs.erase(link);
  const bool ended = !placed_again(why);
  auto reason = ended ? fmt::format("job '{}' is {}", job, why)
                      : fmt::format("job '{}' is being placed again ({})", job, why);
  if (ended && !superseded)
    for (auto& w : st.grants.drop(job))
      send_error(self, w.identity, w.request_id, v1::ERROR_JOB_ENDED, reason);
  else if (!superseded)
    st.grants.revoke(job);
  command_job(self, job, [&](v1::Envelope& e) {
    auto* left = e.mutable_job_left();
    left->set_job(job);
    left->set_reason(reason);
    left->set_state(wire::to_wire(why));
  });
}

} // namespace loom::gateway_steps
