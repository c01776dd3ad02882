#include "gateway/grant_matcher.hpp"

#include <algorithm>

namespace loom {

std::optional<phase_grant> grant_matcher::acquire(const std::string& job, phase_kind phase,
                                                  acquire_waiter waiter) {
  auto k = key{job, phase};
  if (auto g = granted_.find(k); g != granted_.end())
    return g->second;
  acquiring_[k].push_back(std::move(waiter));
  return std::nullopt;
}

std::vector<acquire_waiter> grant_matcher::grant(const phase_grant& g) {
  auto k = key{g.job, g.phase};
  granted_[k] = g;
  auto it = acquiring_.find(k);
  if (it == acquiring_.end())
    return {};
  auto waiters = std::move(it->second);
  acquiring_.erase(it);
  return waiters;
}

void grant_matcher::release(const std::string& job, phase_kind phase) {
  granted_.erase(key{job, phase});
}

std::vector<acquire_waiter> grant_matcher::drop(const std::string& job) {
  std::vector<acquire_waiter> out;
  for (auto it = acquiring_.lower_bound(key{job, phase_kind{}});
       it != acquiring_.end() && it->first.first == job;) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    it = acquiring_.erase(it);
  }
  std::erase_if(granted_, [&](auto& e) { return e.first.first == job; });
  return out;
}

void grant_matcher::revoke(const std::string& job) {
  std::erase_if(granted_, [&](auto& e) { return e.first.first == job; });
}

bool grant_matcher::waiting(const std::string& job) const {
  auto it = acquiring_.lower_bound(key{job, phase_kind{}});
  return it != acquiring_.end() && it->first.first == job;
}

bool grant_matcher::waiting(const std::string& job, phase_kind phase,
                            const std::string& identity, uint64_t request_id) const {
  auto it = acquiring_.find(key{job, phase});
  return it != acquiring_.end()
         && std::any_of(it->second.begin(), it->second.end(), [&](const acquire_waiter& w) {
              return w.identity == identity && w.request_id == request_id;
            });
}

bool grant_matcher::withdraw(const std::string& job, phase_kind phase,
                             const std::string& identity, uint64_t request_id) {
  auto it = acquiring_.find(key{job, phase});
  if (it == acquiring_.end())
    return false;
  auto n = std::erase_if(it->second, [&](const acquire_waiter& w) {
    return w.identity == identity && w.request_id == request_id;
  });
  if (it->second.empty())
    acquiring_.erase(it);
  return n > 0;
}

std::vector<acquire_waiter> grant_matcher::drop_all() {
  std::vector<acquire_waiter> out;
  for (auto& [k, w] : acquiring_)
    out.insert(out.end(), w.begin(), w.end());
  acquiring_.clear();
  return out;
}

size_t grant_matcher::drop_connection(const std::string& identity) {
  size_t n = 0;
  for (auto it = acquiring_.begin(); it != acquiring_.end();) {
    n += std::erase_if(it->second, [&](const acquire_waiter& w) { return w.identity == identity; });
    it = it->second.empty() ? acquiring_.erase(it) : std::next(it);
  }
  return n;
}

size_t grant_matcher::waiting_on(const std::string& identity) const {
  size_t n = 0;
  for (auto& [k, w] : acquiring_)
    n += size_t(std::count_if(w.begin(), w.end(),
                              [&](const acquire_waiter& a) { return a.identity == identity; }));
  return n;
}

size_t grant_matcher::waiting() const {
  size_t n = 0;
  for (auto& [k, w] : acquiring_)
    n += w.size();
  return n;
}

} // namespace loom
