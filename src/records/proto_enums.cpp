#include "records/proto_enums.hpp"

namespace loom {

namespace {

/// The "+1" numbering of every proto enum but JobState.
template <class Proto, named_enum E>
Proto shifted(E x) {
  return Proto(int(x) + 1);
}

template <named_enum E, class Proto>
std::optional<E> unshifted(Proto x) {
  const int v = int(x) - 1;
  if (v < 0 || size_t(v) >= enum_names<E>::table.size())
    return std::nullopt;
  return E(v);
}

static_assert(int(v1::PLACEMENT_KIND_REJECTED) == int(placement_kind::rejected) + 1);
static_assert(int(v1::FABRIC_STAGE_WEIGHT_SYNC) == int(fabric_stage::weight_sync) + 1);
static_assert(int(v1::PRIMITIVE_M2N) == int(primitive::m2n) + 1);
static_assert(int(v1::WINDOW_KIND_IN_STEP) == int(window_kind::in_step) + 1);
static_assert(int(v1::FABRIC_OUTCOME_KEPT) == int(fabric_outcome::kept) + 1);
static_assert(int(v1::EVENT_KIND_GEN_RECONFIGURED) == int(event_kind::gen_reconfigured) + 1);
static_assert(int(v1::EVENT_KIND_OPUS_PROFILED) == int(event_kind::opus_profiled) + 1);
static_assert(int(v1::EVENT_KIND_GEN_STEP_ABORTED) == int(event_kind::gen_step_aborted) + 1);
static_assert(int(v1::EVENT_KIND_OPUS_ENDED) == int(event_kind::opus_ended) + 1);

} // namespace

v1::JobState to_proto(job_state x) {
  switch (x) {
    case job_state::placed: return v1::JOB_STATE_PLACED;
    case job_state::rejected: return v1::JOB_STATE_REJECTED;
    case job_state::finished: return v1::JOB_STATE_FINISHED;
    case job_state::failed: return v1::JOB_STATE_FAILED;
    case job_state::cancelled: return v1::JOB_STATE_CANCELLED;
    case job_state::drifted: return v1::JOB_STATE_DRIFTED;
    case job_state::moved: return v1::JOB_STATE_MOVED;
    case job_state::profiled: return v1::JOB_STATE_PROFILED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<job_state> from_proto(v1::JobState x) {
  switch (x) {
    // Pending and running are states of v1 records no binary wrote: they were placed.
    case v1::JOB_STATE_PENDING:
    case v1::JOB_STATE_PLACED:
    case v1::JOB_STATE_RUNNING: return job_state::placed;
    case v1::JOB_STATE_REJECTED: return job_state::rejected;
    case v1::JOB_STATE_FINISHED: return job_state::finished;
    case v1::JOB_STATE_FAILED: return job_state::failed;
    case v1::JOB_STATE_CANCELLED: return job_state::cancelled;
    case v1::JOB_STATE_DRIFTED: return job_state::drifted;
    case v1::JOB_STATE_MOVED: return job_state::moved;
    case v1::JOB_STATE_PROFILED: return job_state::profiled;
    default: return std::nullopt;
  }
}

v1::PlacementKind to_proto(placement_kind x) {
  return shifted<v1::PlacementKind>(x);
}
v1::FabricStage to_proto(fabric_stage x) {
  return shifted<v1::FabricStage>(x);
}
v1::Primitive to_proto(primitive x) {
  return shifted<v1::Primitive>(x);
}
v1::WindowKind to_proto(window_kind x) {
  return shifted<v1::WindowKind>(x);
}
v1::FabricOutcome to_proto(fabric_outcome x) {
  return shifted<v1::FabricOutcome>(x);
}
v1::EventKind to_proto(event_kind x) {
  return shifted<v1::EventKind>(x);
}

std::optional<placement_kind> from_proto(v1::PlacementKind x) {
  return unshifted<placement_kind>(x);
}
std::optional<fabric_stage> from_proto(v1::FabricStage x) {
  return unshifted<fabric_stage>(x);
}
std::optional<primitive> from_proto(v1::Primitive x) {
  return unshifted<primitive>(x);
}
std::optional<window_kind> from_proto(v1::WindowKind x) {
  return unshifted<window_kind>(x);
}
std::optional<fabric_outcome> from_proto(v1::FabricOutcome x) {
  return unshifted<fabric_outcome>(x);
}
std::optional<event_kind> from_proto(v1::EventKind x) {
  return unshifted<event_kind>(x);
}

} // namespace loom
