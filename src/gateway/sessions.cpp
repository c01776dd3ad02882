#include "gateway/sessions.hpp"

namespace loom {

bool session_table::open(const std::string& worker_id, session s) {
  auto it = sessions_.find(worker_id);
  const bool resumed = it != sessions_.end();
  if (resumed)
    worker_of_.erase(it->second.identity);
  worker_of_[s.identity] = worker_id;
  sessions_[worker_id] = std::move(s);
  return resumed;
}

session* session_table::touch(const std::string& identity, time_point now) {
  auto w = worker_of_.find(identity);
  if (w == worker_of_.end())
    return nullptr;
  auto& s = sessions_.at(w->second);
  s.last_seen = now;
  return &s;
}

const std::string* session_table::worker_of(const std::string& identity) const {
  auto w = worker_of_.find(identity);
  return w == worker_of_.end() ? nullptr : &w->second;
}

void session_table::close(const std::string& identity) {
  auto w = worker_of_.find(identity);
  if (w == worker_of_.end())
    return;
  sessions_.erase(w->second);
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
    dead.emplace_back(it->first, std::move(it->second));
    it = sessions_.erase(it);
  }
  return dead;
}

std::map<worker_role, size_t> session_table::by_role() const {
  std::map<worker_role, size_t> out;
  for (auto& [id, s] : sessions_)
    ++out[s.role];
  return out;
}

std::vector<std::string> session_table::identities_of(const std::string& job) const {
  std::vector<std::string> out;
  for (auto& [id, s] : sessions_)
    if (s.job == job)
      out.push_back(s.identity);
  return out;
}

} // namespace loom
