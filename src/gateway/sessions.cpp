#include "gateway/sessions.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace loom {

open_outcome session_table::check(const std::string& worker_id, const session& s,
                                   std::chrono::milliseconds alive) const {
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end())
    return open_outcome::opened;
  const auto& old = it->second;
  if (old.key != s.key || old.role != s.role)
    return open_outcome::forbidden;
  const bool same_process = !s.incarnation.empty() && old.incarnation == s.incarnation;
  if (!same_process && old.identity != s.identity && s.last_seen - old.last_seen <= alive)
    return open_outcome::conflict;
  return open_outcome::resumed;
}

open_outcome session_table::open(const std::string& worker_id, session s,
                                 std::chrono::milliseconds alive) {
  auto outcome = check(worker_id, s, alive);
  if (outcome == open_outcome::forbidden || outcome == open_outcome::conflict)
    return outcome;
  if (auto it = sessions_.find(worker_id); it != sessions_.end())
    worker_of_.erase(it->second.identity);
  if (auto w = worker_of_.find(s.identity); w != worker_of_.end() && w->second != worker_id)
    erase(sessions_.find(w->second)); // the connection registers as another worker now
  worker_of_[s.identity] = worker_id;
  auto [it, fresh] = sessions_.insert_or_assign(worker_id, std::move(s));
  if (fresh)
    ++per_key_[it->second.key];
  return outcome;
}

size_t session_table::sessions_of_key(const std::string& key) const {
  auto it = per_key_.find(key);
  return it == per_key_.end() ? 0 : it->second;
}

std::map<std::string, session>::iterator
session_table::erase(std::map<std::string, session>::iterator it) {
  auto count = per_key_.find(it->second.key);
  if (--count->second == 0)
    per_key_.erase(count);
  return sessions_.erase(it);
}

session* session_table::touch(const std::string& identity, time_point now) {
  auto w = worker_of_.find(identity);
  if (w == worker_of_.end())
    return nullptr;
  auto& s = sessions_.at(w->second);
  s.last_seen = now;
  return &s;
}

const session* session_table::find(const std::string& worker_id) const {
  auto it = sessions_.find(worker_id);
  return it == sessions_.end() ? nullptr : &it->second;
}

const std::string* session_table::worker_of(const std::string& identity) const {
  auto w = worker_of_.find(identity);
  return w == worker_of_.end() ? nullptr : &w->second;
}

const std::string* session_table::agent_of(const std::string& device) const {
  for (auto& [worker, s] : sessions_)
    if (s.role == worker_role::ocs_agent && s.device == device)
      return &worker;
  return nullptr;
}

void session_table::close(const std::string& identity) {
  auto w = worker_of_.find(identity);
  if (w == worker_of_.end())
    return;
  erase(sessions_.find(w->second));
  worker_of_.erase(w);
}

std::vector<std::pair<std::string, session>>
session_table::expire(time_point now, std::chrono::milliseconds limit) {
  std::vector<std::pair<std::string, session>> dead;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.last_seen <= limit || it->second.role == worker_role::admin) {
      ++it;
      continue;
    }
    worker_of_.erase(it->second.identity);
    dead.emplace_back(it->first, it->second);
    it = erase(it);
  }
  return dead;
}

void session_table::excuse(std::chrono::steady_clock::duration by, time_point now) {
  for (auto& [id, s] : sessions_)
    s.last_seen = std::min(s.last_seen + by, now);
}

std::map<worker_role, size_t> session_table::by_role() const {
  std::map<worker_role, size_t> out;
  for (auto& [id, s] : sessions_)
    ++out[s.role];
  return out;
}

std::vector<std::string> session_table::identities() const {
  std::vector<std::string> out;
  for (auto& [id, s] : sessions_)
    out.push_back(s.identity);
  return out;
}

std::vector<std::string> session_table::workers_of(const std::string& job) const {
  std::vector<std::string> out;
  for (auto& [id, s] : sessions_)
    if (s.job == job)
      out.push_back(fmt::format("{} ({})", id, s.role));
  return out;
}

std::vector<std::pair<std::string, const session*>>
session_table::of_job(const std::string& job) const {
  std::vector<std::pair<std::string, const session*>> out;
  for (auto& [id, s] : sessions_)
    if (s.job == job)
      out.emplace_back(id, &s);
  return out;
}

std::vector<std::string> session_table::identities_of(const std::string& job) const {
  std::vector<std::string> out;
  for (auto& [id, s] : sessions_)
    if (s.job == job)
      out.push_back(s.identity);
  return out;
}

std::vector<std::string> session_table::identities_of(const std::string& deployment,
                                                     worker_role role) const {
  std::vector<std::string> out;
  for (auto& [id, s] : sessions_)
    if (s.role == role && s.deployment == deployment)
      out.push_back(s.identity);
  return out;
}

} // namespace loom
