#include "gateway/rate_limiter.hpp"

#include <algorithm>

namespace loom {

bool rate_limiter::admit(const std::string& key, time_point now) {
  if (rate_ <= 0)
    return true;
  auto [it, fresh] = buckets_.try_emplace(key, bucket{burst_, now});
  auto& b = it->second;
  if (!fresh) {
    std::chrono::duration<double> elapsed = now - b.refilled;
    b.tokens = std::min(burst_, b.tokens + std::max(0.0, elapsed.count()) * rate_);
    b.refilled = now;
  }
  if (b.tokens < 1)
    return false;
  b.tokens -= 1;
  return true;
}

} // namespace loom
