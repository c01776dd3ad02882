#pragma once
// Loom's enums as loom.v1's and back, for the store's records and the gateway's wire. The
// proto enums other than JobState number their values as the C++ ones plus one (0 is
// UNSPECIFIED); the static_asserts in proto_enums.cpp keep the two in step.

#include <optional>
#include <string_view>

#include "loom.pb.h"
#include "types/fabric.hpp"
#include "types/scheduler.hpp"
#include "types/store.hpp"

namespace loom {

v1::JobState to_proto(job_state x);
std::optional<job_state> from_proto(v1::JobState x);

v1::PlacementKind to_proto(placement_kind x);
v1::FabricStage to_proto(fabric_stage x);
v1::Primitive to_proto(primitive x);
v1::WindowKind to_proto(window_kind x);
v1::FabricOutcome to_proto(fabric_outcome x);
v1::EventKind to_proto(event_kind x);

std::optional<placement_kind> from_proto(v1::PlacementKind x);
std::optional<fabric_stage> from_proto(v1::FabricStage x);
std::optional<primitive> from_proto(v1::Primitive x);
std::optional<window_kind> from_proto(v1::WindowKind x);
std::optional<fabric_outcome> from_proto(v1::FabricOutcome x);
std::optional<event_kind> from_proto(v1::EventKind x);

/// A value sent or stored both ways (the enum field, and its text field from before the
/// enum): the enum when it is set, else the text parsed by name.
template <named_enum E, class Proto>
std::optional<E> read_either(Proto proto, std::string_view text) {
  if (int(proto) != 0)
    return from_proto(proto);
  return parse_name<E>(text);
}

} // namespace loom
