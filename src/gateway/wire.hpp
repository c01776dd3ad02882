#pragma once
// loom.v1 envelopes and Loom's types, both ways, for the gateway: roles and phases, run
// permits, fabric intents and decisions, and the admin answers. States and kinds go out both
// as enums and as their text (loom.v1 readers from before the enums); coming in, the enum is
// read when set, else the text.

#include <optional>
#include <string>
#include <utility>

#include <caf/expected.hpp>

#include "loom.pb.h"
#include "protocol/error.hpp"
#include "types/common.hpp"
#include "types/fabric.hpp"
#include "types/generation.hpp"
#include "types/scheduler.hpp"

namespace loom::wire {

/// The name of the envelope's body field, e.g. "phase_acquire"; "none" without one.
std::string body_name(const v1::Envelope& e);

std::optional<worker_role> role_of(v1::Role r);
std::optional<phase_kind> phase_of(v1::Phase p);
v1::Phase to_wire(phase_kind p);
v1::JobState to_wire(job_state s);

/// The wire code of an actor's error.
v1::ErrorCode error_code(errc code);

void fill(v1::PhaseGrant& out, const phase_grant& g);
void fill(v1::TailMigration& out, const gpu_resize& r);
void fill(v1::SubmitReply& out, const placement_reply& r);
void fill(v1::JobInfo& out, const job_status& s);
/// Adds what an inspected job's status carries beyond the listing.
void fill_detail(v1::JobInfo& out, const job_status& s);
void fill(v1::GroupInfo& out, const group_status& g);
void fill(v1::FabricDecision& out, const fabric_decision& d);
void fill(v1::FabricPlanInfo& out, const fabric_plan_status& p);
void fill(v1::OpusJobInfo& out, const opus_job_status& j);

void fill(v1::StepPlaced& out, const step_placement& p);
void fill(v1::StepDone& out, const step_outcome& o);
void fill(v1::GenerationInfo& out, const gen_status& s);

/// A wire intent as the fabric controller takes it (one primitive, the whole volume), or why
/// it is not one.
caf::expected<std::pair<fabric_intent, commit_window>> intent_of(const v1::FabricIntent& w);

} // namespace loom::wire
