#include "gateway/grant_matcher.hpp"

namespace loom {

std::optional<phase_grant> grant_matcher::acquire(const std::string& job, phase_kind phase,
                                                  acquire_waiter waiter) {
  auto k = key{job, phase};
  if (auto g = granted_.find(k); g != granted_.end()) {
    auto grant = std::move(g->second);
    granted_.erase(g);
    return grant;
  }
  acquiring_[k].push_back(std::move(waiter));
  return std::nullopt;
}

std::vector<acquire_waiter> grant_matcher::grant(const phase_grant& g) {
  auto k = key{g.job, g.phase};
  auto it = acquiring_.find(k);
  if (it == acquiring_.end() || it->second.empty()) {
    granted_[k] = g;
    return {};
  }
  auto waiters = std::move(it->second);
  acquiring_.erase(it);
  return waiters;
}

std::vector<acquire_waiter> grant_matcher::drop(const std::string& job) {
  std::vector<acquire_waiter> out;
  for (auto it = acquiring_.begin(); it != acquiring_.end();) {
    if (it->first.first != job) {
      ++it;
      continue;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
    it = acquiring_.erase(it);
  }
  std::erase_if(granted_, [&](auto& e) { return e.first.first == job; });
  return out;
}

size_t grant_matcher::waiting() const {
  size_t n = 0;
  for (auto& [k, w] : acquiring_)
    n += w.size();
  return n;
}

} // namespace loom
