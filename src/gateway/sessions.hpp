#pragma once
// The gateway's sessions, pure: keyed by worker id, found by the connection's ZeroMQ identity,
// and expired when silent for too long (WEAVE §5.3: the dead worker's job fails alone). Admin
// sessions never expire. A worker id belongs to one key and role: a Register of the same id
// with another key or role is forbidden. The same process (same incarnation) reconnecting,
// e.g. to a restarted service, resumes its session; another process is refused while the
// session is alive, and takes it over once it has gone silent.

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "types/common.hpp"
#include "types/scheduler.hpp"

namespace loom {

/// Roles whose sessions run one job's phases; their Register names the job.
constexpr bool runs_job(worker_role r) {
  return r == worker_role::rollout || r == worker_role::train || r == worker_role::driver;
}

/// The WEAVE phases a role acquires and releases: a driver (a framework's single controller)
/// all of them, rollout workers the rollout, trainers the training and the sync of the new
/// weights that follows it.
constexpr bool may_run(worker_role r, phase_kind p) {
  switch (r) {
    case worker_role::driver: return true;
    case worker_role::rollout: return p == phase_kind::rollout;
    case worker_role::train: return p != phase_kind::rollout;
    default: return false;
  }
}

/// Roles whose sessions serve a generation deployment; their Register names it.
constexpr bool serves_generation(worker_role r) {
  return r == worker_role::gen_instance || r == worker_role::gen_router;
}

/// Collective shims announce fabric intents and Opus topo_writes; nobody else does. Each works
/// for one fabric owner (its job), named when it registers, like a job's workers.
constexpr bool announces_fabric(worker_role r) {
  return r == worker_role::collective_shim;
}

struct session {
  std::string identity; // the ZeroMQ routing id of its current connection
  worker_role role = worker_role::rollout;
  std::string node;
  std::string job;
  std::chrono::steady_clock::time_point last_seen;
  std::string key;         // the CURVE public key it authenticated with (empty: insecure)
  std::string incarnation; // the client process's random token
  std::string deployment{}; // gen-instance, gen-router: the generation deployment it serves
  std::string device{};     // ocs-agent: the OCS device it drives
  std::string data_address{}; // job workers: where its share of a sync is served (WEAVE §5.2)
  std::string owner{};        // collective-shim: the fabric owner (job) it works for
};

enum class open_outcome : uint8_t {
  opened,    // a new session
  resumed,   // the same process reconnected, or a silent session was taken over
  forbidden, // the id belongs to another key or role
  conflict,  // a live session of another process holds the id
};

class session_table {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// A worker registers; `alive`: how long a silent session still counts as alive.
  open_outcome open(const std::string& worker_id, session s, std::chrono::milliseconds alive);
  /// What open() would answer, changing nothing.
  open_outcome check(const std::string& worker_id, const session& s,
                     std::chrono::milliseconds alive) const;
  /// The session of a connection (nullptr: not registered), seen now.
  session* touch(const std::string& identity, time_point now);
  /// A worker's session, or nullptr.
  const session* find(const std::string& worker_id) const;
  /// Live sessions opened with CURVE key `key` ("" in insecure mode).
  size_t sessions_of_key(const std::string& key) const;
  /// The worker id a connection is registered as, or nullptr.
  const std::string* worker_of(const std::string& identity) const;
  /// The connection says goodbye.
  void close(const std::string& identity);
  /// Sessions silent longer than `limit`, removed, with their worker ids.
  std::vector<std::pair<std::string, session>> expire(time_point now,
                                                      std::chrono::milliseconds limit);
  /// Every session counts as seen `by` later (never after `now`): the time the observer itself
  /// did not run.
  void excuse(std::chrono::steady_clock::duration by, time_point now);
  /// Live sessions of each role.
  std::map<worker_role, size_t> by_role() const;
  /// A job's sessions, by worker id.
  std::vector<std::pair<std::string, const session*>> of_job(const std::string& job) const;
  /// The connections of a job's sessions.
  std::vector<std::string> identities_of(const std::string& job) const;
  /// The connections of a deployment's sessions of one role.
  std::vector<std::string> identities_of(const std::string& deployment, worker_role role) const;
  /// The worker id of the ocs-agent session driving `device`, or nullptr.
  const std::string* agent_of(const std::string& device) const;
  /// Every live session's connection.
  std::vector<std::string> identities() const;
  /// A job's sessions as "worker-id (role)".
  std::vector<std::string> workers_of(const std::string& job) const;

private:
  std::map<std::string, session>::iterator erase(std::map<std::string, session>::iterator it);

  std::map<std::string, session> sessions_;        // by worker id
  std::map<std::string, std::string> worker_of_;   // identity -> worker id
  std::map<std::string, size_t> per_key_;          // key -> live sessions
};

} // namespace loom
