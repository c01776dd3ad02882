#include "store/persist.hpp"

#include <spdlog/spdlog.h>

#include "protocol/error.hpp"

namespace loom {

namespace {

/// What an event's subject is, as its log line names it.
std::string_view subject_key(event_kind k) {
  switch (k) {
    case event_kind::fabric_committed:
    case event_kind::fabric_plan_deferred:
    case event_kind::fabric_plan_kept:
    case event_kind::fabric_commit_failed: return "owner";
    case event_kind::ocs_port_masked:
    case event_kind::ocs_device_down:
    case event_kind::ocs_device_resumed: return "device";
    case event_kind::gen_reconfigured:
    case event_kind::gen_step_started:
    case event_kind::gen_step_done:
    case event_kind::gen_step_aborted:
    case event_kind::gen_engine_lost:
    case event_kind::gen_command_abandoned: return "deployment";
    case event_kind::node_failed:
    case event_kind::node_recovered: return "node";
    default: return "job";
  }
}

spdlog::level::level_enum level_of(event_kind k) {
  switch (k) {
    case event_kind::fabric_commit_failed:
    case event_kind::ocs_port_masked:
    case event_kind::ocs_device_down:
    case event_kind::gen_step_aborted:
    case event_kind::node_failed:
    case event_kind::opus_fallback: return spdlog::level::warn;
    default: return spdlog::level::info;
  }
}

} // namespace

void log_event(const loom_event& e) {
  spdlog::log(level_of(e.kind), "event={} {}={} {}", e.kind, subject_key(e.kind), e.subject,
              e.detail);
}

void log_unstored(const loom_event& e, const caf::error& err) {
  spdlog::error("event=decision_not_stored kind={} {}={} error=\"{}\"", e.kind,
                subject_key(e.kind), e.subject, render(err));
}

} // namespace loom
