#include "store/records.hpp"

#include "loom.pb.h"

namespace loom {

std::string_view column_family_name(record_kind kind) {
  switch (kind) {
    case record_kind::meta: return "meta";
    case record_kind::jobs: return "jobs";
    case record_kind::groups: return "groups";
    case record_kind::placements: return "placements";
    case record_kind::circuit_plans: return "circuit_plans";
    case record_kind::events: return "events";
  }
  return "meta";
}

std::string to_string(record_kind kind) {
  return std::string{column_family_name(kind)};
}

std::string encode_event(int64_t time_ns, std::string kind, std::string subject,
                         std::string detail) {
  v1::Event e;
  e.set_time_ns(time_ns);
  e.set_kind(std::move(kind));
  e.set_subject(std::move(subject));
  e.set_detail(std::move(detail));
  return e.SerializeAsString();
}

std::string event_key(uint64_t seq) {
  std::string key(8, '\0');
  for (int i = 7; i >= 0; --i) {
    key[static_cast<size_t>(i)] = static_cast<char>(seq & 0xff);
    seq >>= 8;
  }
  return key;
}

uint64_t event_seq(std::string_view key) {
  uint64_t seq = 0;
  for (size_t i = 0; i < 8 && i < key.size(); ++i)
    seq = (seq << 8) | static_cast<unsigned char>(key[i]);
  return seq;
}

} // namespace loom
