#pragma once
// A client of etcd's v3 API through its JSON gateway (the same RPCs as gRPC, POST /v3/...,
// bytes base64-encoded), over libcurl: ranges, transactions, leases, compaction, status, and
// a streamed watch. Several endpoints: a call that finds one unreachable, or without quorum,
// goes on to the next. Thread-safe; every failure is a value (errc::unavailable when no
// endpoint could do it, the etcd server's own reason otherwise).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/expected.hpp>

#include "types/ha.hpp"

namespace loom {

struct etcd_options {
  std::vector<std::string> endpoints;
  ha_tls tls;
  uint32_t request_timeout_ms = 2000;
};

struct etcd_range_result {
  int64_t revision = 0; // the store's revision when it was read
  std::vector<etcd_kv> kvs;
  bool more = false; // a limit cut it short
};

struct etcd_txn_result {
  int64_t revision = 0;
  bool succeeded = false;
  std::vector<etcd_kv> kvs; // what the failure branch's range read (the compared key)
};

/// One member's own view (maintenance Status), for `loom ha` and the health metrics.
struct etcd_member_status {
  std::string endpoint;
  bool healthy = false;
  std::string error;      // why it is not
  std::string version;
  int64_t db_size = 0;    // bytes of its backend file
  int64_t db_size_in_use = 0;
  uint64_t member_id = 0;
  uint64_t leader = 0;    // the Raft leader's member id
  int64_t raft_index = 0;
  int64_t revision = 0;
};

class etcd_client {
public:
  explicit etcd_client(etcd_options options);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  /// The keys in [key, range_end) (`key` alone if range_end is empty), at `revision` (0: now),
  /// at most `limit` (0: all).
  caf::expected<etcd_range_result> range(const std::string& key, const std::string& range_end = {},
                                         int64_t revision = 0, int64_t limit = 0);

  /// If every compare holds, the ops; else a range of the first compare's key. On failure
  /// `maybe_applied` (if given) says whether etcd may have taken it anyway (a request that
  /// reached a member and timed out there), or surely not (no member could be reached, or
  /// one said it has no Raft leader).
  caf::expected<etcd_txn_result> txn(const std::vector<etcd_compare>& compares,
                                     const std::vector<etcd_op>& ops,
                                     bool* maybe_applied = nullptr);

  /// A lease of `ttl_s` seconds; its id.
  caf::expected<int64_t> grant(int64_t ttl_s);
  /// Renews the lease; its TTL left (0: it expired or was revoked).
  caf::expected<int64_t> keep_alive(int64_t lease);
  caf::error revoke(int64_t lease);
  /// Drops the history before `revision` (watches and reads there then fail as compacted).
  caf::error compact(int64_t revision);

  /// Each endpoint's own status (asked of that endpoint alone).
  std::vector<etcd_member_status> status();

  const etcd_options& options() const { return options_; }

  class pool; // libcurl handles, reused (one connection each)

private:
  /// POSTs `body` (JSON) to `path` on the endpoints in turn, from the last one that answered.
  caf::expected<std::string> call(const std::string& path, const std::string& body,
                                  bool* maybe_applied = nullptr);

  etcd_options options_;
  std::unique_ptr<pool> pool_;
  std::atomic<size_t> current_{0};
};

/// A watch of [key, range_end) from `start_revision`, streamed on its own thread from one
/// endpoint after another: each response's events with the revision etcd had then. It ends
/// when stopped, or with an error (`compacted`: the revision asked for is gone from etcd's
/// history); `on_end` hears which.
class etcd_watch {
public:
  struct ending {
    bool compacted = false;
    std::string error; // empty when stopped
  };
  using on_events = std::function<void(std::vector<etcd_event>, int64_t revision)>;
  using on_end = std::function<void(ending)>;

  etcd_watch(etcd_options options, std::string key, std::string range_end,
             int64_t start_revision, on_events events, on_end end);
  ~etcd_watch(); // stops and joins
  etcd_watch(const etcd_watch&) = delete;
  etcd_watch& operator=(const etcd_watch&) = delete;

  void stop();

private:
  void run();
  /// One stream from one endpoint; false when the watch is over (stopped or compacted).
  bool stream(const std::string& endpoint);

  etcd_options options_;
  std::string key_, range_end_;
  int64_t next_revision_;
  on_events events_;
  on_end end_;
  std::atomic<bool> stop_{false};
  void* multi_ = nullptr; // CURLM*, woken by stop()
  std::mutex mutex_;
  std::string buffer_;
  ending ending_;
  std::thread thread_;
};

} // namespace loom
