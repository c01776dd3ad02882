#pragma once
// The gateway's sessions, pure: keyed by worker id (stable across reconnects: a Register with
// the same id takes the session over from the old connection), found by the connection's
// ZeroMQ identity, and expired when silent for too long (WEAVE §5.3: the dead worker's job
// fails alone). Admin sessions never expire.

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/types.hpp"

namespace loom {

struct session {
  std::string identity; // the ZeroMQ routing id of its current connection
  worker_role role = worker_role::rollout;
  std::string node;
  std::string job;
  std::chrono::steady_clock::time_point last_seen;
};

class session_table {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A worker registers; true if it took over an earlier session of the same id.
  bool open(const std::string& worker_id, session s);
  /// The session of a connection (nullptr: not registered), seen now.
  session* touch(const std::string& identity, time_point now);
  /// The worker id a connection is registered as, or nullptr.
  const std::string* worker_of(const std::string& identity) const;
  /// The connection says goodbye.
  void close(const std::string& identity);
  /// Sessions silent longer than `limit`, removed, with their worker ids.
  std::vector<std::pair<std::string, session>> expire(time_point now,
                                                      std::chrono::milliseconds limit);
  /// Live sessions of each role.
  std::map<worker_role, size_t> by_role() const;
  /// The connections of a job's sessions.
  std::vector<std::string> identities_of(const std::string& job) const;

private:
  std::map<std::string, session> sessions_;        // by worker id
  std::map<std::string, std::string> worker_of_;   // identity -> worker id
};

} // namespace loom
