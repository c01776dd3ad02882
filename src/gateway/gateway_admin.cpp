// The gateway's admin requests (the loom CLI): submit, list, inspect, cancel, groups, node,
// fabric.

#include <caf/all.hpp>
#include <fmt/format.h>

#include <algorithm>

#include "gateway/gateway_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "scheduler/job_spec.hpp"

namespace loom::gateway_steps {

namespace {

constexpr uint32_t max_jobs_page = 10'000; // about 1.5 MB of JobInfo

auto failure(self_ptr self, const std::string& identity, uint64_t rid) {
  return [self, identity, rid](caf::error& err) { send_failure(self, identity, rid, err); };
}

void submit(self_ptr self, const std::string& identity, uint64_t rid, const v1::SubmitJob& job) {
  auto spec = parse_job_spec(job.spec_toml(), job.source().empty() ? "<submitted>" : job.source(),
                             self->state.config.default_slo);
  if (!spec.value) {
    std::string msg;
    for (auto& e : spec.errors)
      msg += (msg.empty() ? "" : "\n") + e.to_string();
    send_error(self, identity, rid, v1::ERROR_INVALID, msg);
    return;
  }
  self->request(self->state.scheduler, caf::infinite, submit_atom::value, *spec.value)
    .then(
      [self, identity, rid](const placement_reply& r) {
        reply(self, identity, rid,
              [&](v1::Envelope& e) { wire::fill(*e.mutable_submit_reply(), r); });
      },
      failure(self, identity, rid));
}

/// A page of jobs: a list of any length fits no frame (100k jobs are 14.5 MB of JobInfo).
void list_jobs(self_ptr self, const std::string& identity, uint64_t rid, const v1::ListJobs& m) {
  const uint32_t limit = m.limit() == 0 ? max_jobs_page : std::min(m.limit(), max_jobs_page);
  // One more than the page tells whether another follows.
  self->request(self->state.scheduler, caf::infinite, jobs_atom::value, m.after(), limit + 1)
    .then(
      [self, identity, rid, limit](const std::vector<job_status>& jobs) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* list = e.mutable_job_list();
          for (size_t i = 0; i < jobs.size() && i < limit; ++i)
            wire::fill(*list->add_jobs(), jobs[i]);
          if (jobs.size() > limit)
            list->set_next_after(jobs[limit - 1].job);
        });
      },
      failure(self, identity, rid));
}

/// One job: where it runs, how far it got, its workers, and why it waits.
void inspect_job(self_ptr self, const std::string& identity, uint64_t rid,
                 const std::string& job) {
  self->request(self->state.scheduler, caf::infinite, job_atom::value, job)
    .then(
      [self, identity, rid](const job_status& s) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* info = e.mutable_job_info();
          wire::fill(*info, s);
          wire::fill_detail(*info, s);
          for (auto& w : self->state.sessions.workers_of(s.job))
            info->add_workers(w);
        });
      },
      failure(self, identity, rid));
}

void cancel(self_ptr self, const std::string& identity, uint64_t rid, const std::string& job) {
  self->request(self->state.scheduler, caf::infinite, cancel_atom::value, job)
    .then([self, identity, rid](ok_atom) {
            reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
          },
          failure(self, identity, rid));
}

void report_node(self_ptr self, const std::string& identity, uint64_t rid,
                 const v1::NodeReport& r) {
  self->request(self->state.scheduler, caf::infinite, node_atom::value,
                node_report{r.node(), r.failed(), r.reason()})
    .then(
      [self, identity, rid](const node_outcome& o) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* out = e.mutable_node_outcome();
          for (auto& j : o.failed_jobs)
            out->add_failed_jobs(j);
          for (auto& owner : o.replanning)
            out->add_replanning(owner);
        });
      },
      failure(self, identity, rid));
}

void list_groups(self_ptr self, const std::string& identity, uint64_t rid) {
  self->request(self->state.scheduler, caf::infinite, groups_atom::value)
    .then(
      [self, identity, rid](const std::vector<group_status>& groups) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* list = e.mutable_group_list();
          for (auto& g : groups)
            wire::fill(*list->add_groups(), g);
        });
      },
      failure(self, identity, rid));
}

void list_fabric(self_ptr self, const std::string& identity, uint64_t rid) {
  if (!self->state.fabric) {
    send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
    return;
  }
  self->request(self->state.fabric, caf::infinite, plans_atom::value)
    .then(
      [self, identity, rid](const fabric_listing& listing) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* list = e.mutable_fabric_plans();
          for (auto& p : listing.plans)
            wire::fill(*list->add_plans(), p);
          for (auto& j : listing.opus)
            wire::fill(*list->add_opus(), j);
        });
      },
      failure(self, identity, rid));
}

} // namespace

bool is_admin_request(const v1::Envelope& env) {
  switch (env.body_case()) {
    case v1::Envelope::kSubmitJob:
    case v1::Envelope::kListJobs:
    case v1::Envelope::kInspectJob:
    case v1::Envelope::kCancelJob:
    case v1::Envelope::kListGroups:
    case v1::Envelope::kNodeReport:
    case v1::Envelope::kListFabric:
    case v1::Envelope::kListGeneration:
    case v1::Envelope::kAbortStep:
    case v1::Envelope::kSetLayout: return true;
    default: return false;
  }
}

void handle_admin(self_ptr self, const std::string& identity, const v1::Envelope& env) {
  auto rid = env.request_id();
  switch (env.body_case()) {
    case v1::Envelope::kSubmitJob: submit(self, identity, rid, env.submit_job()); return;
    case v1::Envelope::kListJobs: list_jobs(self, identity, rid, env.list_jobs()); return;
    case v1::Envelope::kInspectJob: inspect_job(self, identity, rid, env.inspect_job().job()); return;
    case v1::Envelope::kCancelJob: cancel(self, identity, rid, env.cancel_job().job()); return;
    case v1::Envelope::kListGroups: list_groups(self, identity, rid); return;
    case v1::Envelope::kNodeReport: report_node(self, identity, rid, env.node_report()); return;
    case v1::Envelope::kListFabric: list_fabric(self, identity, rid); return;
    case v1::Envelope::kOpusJobEnd:
      end_opus_job(self, identity, rid, env.opus_job_end().job());
      return;
    case v1::Envelope::kListGeneration: list_generation(self, identity, rid); return;
    case v1::Envelope::kAbortStep: abort_step(self, identity, rid, env.abort_step()); return;
    case v1::Envelope::kSetLayout: set_layout(self, identity, rid, env.set_layout()); return;
    default: return;
  }
}

} // namespace loom::gateway_steps
