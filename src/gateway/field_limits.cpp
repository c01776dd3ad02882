#include "gateway/field_limits.hpp"

#include <map>
#include <mutex>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

namespace loom::wire {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

size_t limit_of(std::string_view field) {
  if (field == "spec_toml")
    return max_spec_bytes;
  for (std::string_view text : {"reason", "message", "detail", "source", "error", "recent"})
    if (field == text)
      return max_text_bytes;
  return max_id_bytes;
}

/// Whether a message type holds strings at any depth: GenStats' thousands of numeric
/// RequestProgress entries are not walked.
bool holds_strings(const Descriptor* d) {
  static std::mutex mutex;
  static std::map<const Descriptor*, bool> known;
  std::lock_guard lock{mutex};
  auto walk = [](auto& self, const Descriptor* t, std::map<const Descriptor*, bool>& memo) -> bool {
    if (auto it = memo.find(t); it != memo.end())
      return it->second;
    memo[t] = false; // a recursive type counts as string-free until a string is found
    bool any = false;
    for (int i = 0; i < t->field_count() && !any; ++i) {
      auto* f = t->field(i);
      any = f->type() == FieldDescriptor::TYPE_STRING || f->type() == FieldDescriptor::TYPE_BYTES
            || (f->type() == FieldDescriptor::TYPE_MESSAGE && self(self, f->message_type(), memo));
    }
    return memo[t] = any;
  };
  return walk(walk, d, known);
}

std::optional<std::string> check(const Message& m, const std::string& path) {
  auto* r = m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (auto* f : fields) {
    auto name = path.empty() ? f->name() : path + "." + f->name();
    if (f->type() == FieldDescriptor::TYPE_STRING || f->type() == FieldDescriptor::TYPE_BYTES) {
      auto limit = limit_of(f->name());
      int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
      std::string scratch;
      for (int i = 0; i < n; ++i) {
        auto size = f->is_repeated() ? r->GetRepeatedStringReference(m, f, i, &scratch).size()
                                     : r->GetStringReference(m, f, &scratch).size();
        if (size > limit)
          return fmt::format("{} is {} bytes (limit {})", name, size, limit);
      }
    } else if (f->type() == FieldDescriptor::TYPE_MESSAGE && holds_strings(f->message_type())) {
      int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        auto& sub = f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        if (auto bad = check(sub, name))
          return bad;
      }
    }
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> oversized_field(const Message& m) {
  return check(m, "");
}

} // namespace loom::wire
