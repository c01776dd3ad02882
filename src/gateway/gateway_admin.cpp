// The gateway's admin requests (the loom CLI): submit, list, inspect, cancel, groups, fabric.

#include <caf/all.hpp>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/inspect.hpp"
#include "gateway/gateway_steps.hpp"
#include "scheduler/job_spec.hpp"

namespace loom::gateway_steps {

namespace {

auto internal_error(self_ptr self, const std::string& identity, uint64_t rid) {
  return [self, identity, rid](caf::error& err) {
    send_error(self, identity, rid, v1::ERROR_INTERNAL, render(err));
  };
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
      internal_error(self, identity, rid));
}

/// Every job, or only `only` (an unknown one is an error).
void list_jobs(self_ptr self, const std::string& identity, uint64_t rid, std::string only) {
  self->request(self->state.scheduler, caf::infinite, jobs_atom::value)
    .then(
      [self, identity, rid, only](const std::vector<job_status>& jobs) {
        if (only.empty()) {
          reply(self, identity, rid, [&](v1::Envelope& e) {
            auto* list = e.mutable_job_list();
            for (auto& s : jobs)
              wire::fill(*list->add_jobs(), s);
          });
          return;
        }
        for (auto& s : jobs)
          if (s.job == only) {
            reply(self, identity, rid,
                  [&](v1::Envelope& e) { wire::fill(*e.mutable_job_info(), s); });
            return;
          }
        send_error(self, identity, rid, v1::ERROR_NOT_FOUND, fmt::format("no job '{}'", only));
      },
      internal_error(self, identity, rid));
}

void cancel(self_ptr self, const std::string& identity, uint64_t rid, const std::string& job) {
  self->request(self->state.scheduler, caf::infinite, cancel_atom::value, job)
    .then([self, identity, rid](ok_atom) {
            reply(self, identity, rid, [](v1::Envelope& e) { e.mutable_ok(); });
          },
          [self, identity, rid](caf::error& err) {
            send_error(self, identity, rid, v1::ERROR_NOT_FOUND, render(err));
          });
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
      internal_error(self, identity, rid));
}

void list_fabric(self_ptr self, const std::string& identity, uint64_t rid) {
  if (!self->state.fabric) {
    send_error(self, identity, rid, v1::ERROR_UNAVAILABLE, "this service runs no fabric");
    return;
  }
  self->request(self->state.fabric, caf::infinite, plans_atom::value)
    .then(
      [self, identity, rid](const std::vector<fabric_plan_status>& plans) {
        reply(self, identity, rid, [&](v1::Envelope& e) {
          auto* list = e.mutable_fabric_plans();
          for (auto& p : plans)
            wire::fill(*list->add_plans(), p);
        });
      },
      internal_error(self, identity, rid));
}

} // namespace

bool handle_admin(self_ptr self, const std::string& identity, const v1::Envelope& env) {
  auto rid = env.request_id();
  switch (env.body_case()) {
    case v1::Envelope::kSubmitJob: submit(self, identity, rid, env.submit_job()); return true;
    case v1::Envelope::kListJobs: list_jobs(self, identity, rid, ""); return true;
    case v1::Envelope::kInspectJob:
      list_jobs(self, identity, rid, env.inspect_job().job());
      return true;
    case v1::Envelope::kCancelJob: cancel(self, identity, rid, env.cancel_job().job()); return true;
    case v1::Envelope::kListGroups: list_groups(self, identity, rid); return true;
    case v1::Envelope::kListFabric: list_fabric(self, identity, rid); return true;
    default: return false;
  }
}

} // namespace loom::gateway_steps
