#pragma once
// One replica of a cluster's control plane on etcd ([ha], docs/ha.md). It holds an etcd lease
// for as long as it lives. Standing by, it mirrors the keyspace into its own store (a watch
// from the revision the store has applied; the whole keyspace read again if etcd compacted
// that away) and campaigns whenever no replica leads: a transaction that creates the election
// key under its lease if nobody holds it. Elected, it waits until its store has applied the
// election itself, so it holds every decision committed before, and the service then restores
// from that store exactly as after a restart. Leading, every write of the store is first a
// transaction conditioned on the election key's create revision being its own, so a deposed
// leader can commit nothing; and it stops acting the moment its lease may have ended by its
// own clock (from the last renewal it sent), before anyone else can have been elected.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ha/etcd.hpp"
#include "ha/keyspace.hpp"
#include "metrics/metrics.hpp"
#include "store/database.hpp"
#include "store/replication.hpp"

namespace loom {

class replica final : public replication {
public:
  /// Leadership can end without stand_down() (the lease lapsed, another replica holds the
  /// election key, the store diverged): whoever runs the service polls leading().
  replica(ha_config config, std::string metrics_address, std::shared_ptr<database> db,
          std::shared_ptr<service_metrics> metrics);
  /// The same, with no store yet: stand_by() is given one.
  replica(ha_config config, std::string metrics_address,
          std::shared_ptr<service_metrics> metrics);
  ~replica() override; // stops its threads; the lease is left to expire (a crash does that too)
  replica(const replica&) = delete;
  replica& operator=(const replica&) = delete;

  /// Mirrors and campaigns until this replica leads with its store caught up (true), or
  /// `stopping()` (false: polled every few tens of milliseconds).
  bool stand_by(const std::function<bool()>& stopping);
  /// The same into `db`, which the replica holds only until it returns: the store it leads
  /// with owns it alone then (a store that fails closes and reopens its database).
  bool stand_by(std::shared_ptr<database> db, const std::function<bool()>& stopping);

  /// Ends this replica's leadership (a shutdown, or an operator's SIGUSR1): the election key
  /// is deleted, fenced by its create revision, so a standby takes over without waiting out
  /// the lease.
  void stand_down(std::string_view why);

  /// Leads, and its lease cannot have expired yet: it may act now.
  bool leading() const;

  /// This term is over: the service stops acting and stands by again. `lost()`: another
  /// replica may lead now (the lease expired, the election key is another's, the store
  /// diverged); else it was suspended (its lease could not be renewed, or a commit was left
  /// unresolved: no etcd quorum, say) and may lead again on the same lease, its store first
  /// brought up to etcd's.
  bool term_over() const { return term_over_; }
  bool lost() const { return !leading_; }

  caf::expected<int64_t> commit(const std::vector<const write_batch*>& batches,
                                uint64_t first_seq) override;
  void diverged(const caf::error& why) override;

  const ha_config& config() const { return config_; }

private:
  void keep_lease();                 // the lease thread
  void lose(const std::string& why);    // leadership ended: another replica may lead
  void suspend(const std::string& why); // the term ends, the lease may still hold
  void publish();                    // this replica's status key
  bool erase_election_key();         // fenced by this term's revision
  bool start_mirror();
  bool full_sync();
  void apply(std::vector<etcd_event> events, int64_t revision);
  /// The mirrored batches in one write, with the revision they bring the store to.
  caf::error write_applied(const std::vector<write_batch>& batches, int64_t revision,
                           bool mark_revision);
  /// Elected: true once the store holds everything before the election.
  bool campaign();
  /// A first leader of an empty keyspace whose store holds state: etcd gets it all.
  caf::error seed();
  bool wait_applied(int64_t revision);
  std::chrono::steady_clock::time_point valid_until() const;

  ha_config config_;
  std::string metrics_address_;
  keyspace keys_;
  etcd_client client_;
  std::shared_ptr<database> db_;
  std::shared_ptr<service_metrics> metrics_;

  std::atomic<int64_t> lease_{0};
  std::atomic<int64_t> valid_until_ns_{0}; // steady clock
  std::atomic<bool> leading_{false};
  std::atomic<bool> term_over_{false};
  int64_t leader_revision_ = 0; // the election key's create revision while leading
  int64_t compacted_to_ = 0;
  std::chrono::steady_clock::time_point campaign_after_{}; // after standing down, others first

  std::mutex mutex_; // the store while the mirror writes it, and what follows
  std::condition_variable changed_;
  std::unique_ptr<etcd_watch> mirror_;
  std::atomic<int64_t> applied_{0};
  std::atomic<bool> leader_present_{true};
  std::atomic<bool> resync_{false};  // the watch's revision was compacted away
  bool seed_pending_ = false;
  std::string mirror_error_; // the store cannot mirror this keyspace (it never leads then)
  std::string leader_name_;  // who leads, as the last campaign found

  std::atomic<bool> stop_{false};
  std::mutex lease_mutex_;
  std::condition_variable lease_wake_;
  std::thread lease_thread_;
};

} // namespace loom
