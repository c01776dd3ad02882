// The gateway's decoding of a peer's frame, as handle_frame runs it before dispatch: the
// loom.v1 envelope, its field limits, and the decoders of the bodies that carry structured
// data (generation stats, completions, acks, commands, fabric intents, roles and phases, a
// submitted job spec).
// A decoded body must encode and decode again without loss of its size.

#include <cstdint>
#include <cstdlib>

#include "gateway/field_limits.hpp"
#include "gateway/wire.hpp"
#include "records/gen_proto.hpp"
#include <google/protobuf/stubs/logging.h>

#include "loom.pb.h"
#include "scheduler/job_spec.hpp"

namespace {

// libprotobuf logs each invalid UTF-8 string it refuses; the service routes that to debug.
[[maybe_unused]] const bool quiet = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

void require(bool ok) {
  if (!ok)
    std::abort();
}

void decode_generation(const loom::v1::Envelope& env) {
  if (env.has_gen_stats())
    (void)loom::stats_of(env.gen_stats(), "engine");
  if (env.has_requests_finished())
    for (auto& done : env.requests_finished().requests())
      (void)loom::done_of(done);
  if (env.has_command_ack())
    (void)loom::ack_of(env.command_ack(), "engine");
  (void)loom::command_of(env, "engine");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  loom::v1::Envelope env;
  if (!env.ParseFromArray(data, int(size)) || env.body_case() == loom::v1::Envelope::BODY_NOT_SET)
    return 0;
  (void)loom::wire::body_name(env);
  if (loom::wire::oversized_field(env))
    return 0; // refused before any decoding, as the gateway does
  if (env.has_register_())
    (void)loom::wire::role_of(env.register_().role());
  if (env.has_phase_acquire())
    (void)loom::wire::phase_of(env.phase_acquire().phase());
  if (env.has_fabric_intent())
    (void)loom::wire::intent_of(env.fabric_intent());
  if (env.has_submit_job())
    (void)loom::parse_job_spec(env.submit_job().spec_toml(), "submit", 1.5);
  decode_generation(env);
  // What the gateway keeps or forwards re-encodes to a frame of the same size.
  loom::v1::Envelope again;
  require(again.ParseFromString(env.SerializeAsString()));
  require(again.ByteSizeLong() == env.ByteSizeLong());
  return 0;
}
