#pragma once
// The generation runtime's plain data as loom.v1 messages and back: what engines and routers
// send and receive on the wire, and what the store keeps of commands in flight. Pure.

#include <optional>
#include <string>

#include "loom.pb.h"
#include "types/generation.hpp"

namespace loom {

v1::ParallelConfig to_proto(const parallel_config& c);
parallel_config from_proto(const v1::ParallelConfig& c);

void fill(v1::RequestProgress& out, const request_state& s);
request_state state_of(const v1::RequestProgress& p);

void fill(v1::GenStats& out, const instance_stats& s, const std::string& deployment);
instance_stats stats_of(const v1::GenStats& m, const std::string& engine);

void fill(v1::RequestDone& out, const request_done& d);
request_done done_of(const v1::RequestDone& d);

void fill(v1::AdmittedRequest& out, const admitted_request& a);
admitted_request admitted_of(const v1::AdmittedRequest& a);

void fill(v1::InstanceSlot& out, const instance_slot& s);
/// `otherwise`: the config of a slot that names none (a homogeneous layout's, from older peers).
instance_slot slot_of(const v1::InstanceSlot& s, const parallel_config& otherwise);

/// The command as the envelope body an engine receives (Reconfigure, AdmitRequests or
/// MigrateRequests).
void fill_command(v1::Envelope& out, const gen_command& c, const std::string& deployment);
/// The command an envelope carries (its engine is the receiver's); nothing if it carries none.
std::optional<gen_command> command_of(const v1::Envelope& e, const std::string& engine);

v1::GenCounters to_proto(const gen_counters& c);
gen_counters from_proto(const v1::GenCounters& c);

void fill(v1::CommandAck& out, const command_ack& a, const std::string& deployment);
command_ack ack_of(const v1::CommandAck& a, const std::string& engine);

} // namespace loom
