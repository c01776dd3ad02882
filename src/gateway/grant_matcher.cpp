#include "gateway/grant_matcher.hpp"

#include <algorithm>

namespace loom {

std::optional<phase_grant> grant_matcher::acquire(const std::string& job, phase_kind phase,
                                                  acquire_waiter waiter) {
  auto k = key{job, phase};
  if (auto g = granted_.find(k); g != granted_.end())
    return g->second;
  ++per_connection_[waiter.identity];
  ++waiting_;
  acquiring_[k].push_back(std::move(waiter));
  return std::nullopt;
}

void grant_matcher::forget(const std::vector<acquire_waiter>& answered) {
  for (auto& w : answered) {
    auto it = per_connection_.find(w.identity);
    if (--it->second == 0)
      per_connection_.erase(it);
  }
  waiting_ -= answered.size();
}

std::vector<acquire_waiter> grant_matcher::grant(const phase_grant& g) {
  auto k = key{g.job, g.phase};
  granted_[k] = g;
  auto it = acquiring_.find(k);
  if (it == acquiring_.end())
    return {};
  auto waiters = std::move(it->second);
  acquiring_.erase(it);
  forget(waiters);
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
  forget(out);
  return out;
}

void grant_matcher::revoke(const std::string& job) {
  std::erase_if(granted_, [&](auto& e) { return e.first.first == job; });
}

std::vector<std::pair<phase_kind, acquire_waiter>>
grant_matcher::waiters(const std::string& job) const {
  std::vector<std::pair<phase_kind, acquire_waiter>> out;
  for (auto it = acquiring_.lower_bound(key{job, phase_kind{}});
       it != acquiring_.end() && it->first.first == job; ++it)
    for (auto& w : it->second)
      out.emplace_back(it->first.second, w);
  return out;
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
  auto match = std::find_if(it->second.begin(), it->second.end(), [&](const acquire_waiter& w) {
    return w.identity == identity && w.request_id == request_id;
  });
  if (match == it->second.end())
    return false;
  forget({*match});
  it->second.erase(match);
  if (it->second.empty())
    acquiring_.erase(it);
  return true;
}

std::vector<acquire_waiter> grant_matcher::drop_all() {
  std::vector<acquire_waiter> out;
  for (auto& [k, w] : acquiring_)
    out.insert(out.end(), w.begin(), w.end());
  acquiring_.clear();
  per_connection_.clear();
  waiting_ = 0;
  return out;
}

size_t grant_matcher::drop_connection(const std::string& identity) {
  auto n = waiting_on(identity);
  if (n == 0)
    return 0;
  for (auto it = acquiring_.begin(); it != acquiring_.end();) {
    std::erase_if(it->second, [&](const acquire_waiter& w) { return w.identity == identity; });
    it = it->second.empty() ? acquiring_.erase(it) : std::next(it);
  }
  per_connection_.erase(identity);
  waiting_ -= n;
  return n;
}

size_t grant_matcher::waiting_on(const std::string& identity) const {
  auto it = per_connection_.find(identity);
  return it == per_connection_.end() ? 0 : it->second;
}

} // namespace loom
