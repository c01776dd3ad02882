#pragma once
// Size limits of loom.v1 string fields, so that a peer cannot make the service keep, log or
// store names of its choosing at any size: ids and names (job, worker_id, node, deployment...)
// are at most 256 bytes, free text (reasons, messages) 16 KiB, a job spec 1 MiB. The frame as a
// whole is bounded by the socket (max_frame_bytes).

#include <cstddef>
#include <optional>
#include <string>

namespace google::protobuf {
class Message;
}

namespace loom::wire {

constexpr size_t max_id_bytes = 256;
constexpr size_t max_text_bytes = 16 << 10;
constexpr size_t max_spec_bytes = 1 << 20;

/// The first string field over its limit, as "FIELD.PATH is N bytes (limit L)", or nothing.
std::optional<std::string> oversized_field(const google::protobuf::Message& m);

} // namespace loom::wire
