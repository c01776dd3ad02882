#include "types/fabric.hpp"

#include <fmt/format.h>

namespace loom {

std::string fabric_intent::signature() const {
  // Members hash (FNV-1a) keeps the key short for thousands of ranks.
  uint64_t h = 1469598103934665603ull;
  for (auto& r : members) {
    for (uint64_t v : {uint64_t(r.server), uint64_t(r.gpu)}) {
      h ^= v;
      h *= 1099511628211ull;
    }
  }
  std::string mix_kinds;
  for (auto& m : mix)
    mix_kinds += fmt::format("{}{}", mix_kinds.empty() ? "" : "+", to_string(m.kind));
  return fmt::format("{}/{}/{}/{}x{}/{:016x}", owner, to_string(stage), mix_kinds, members.size(),
                     group_size, h);
}

} // namespace loom
