#include "ha/replica.hpp"

#include <chrono>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "protocol/error.hpp"
#include "records/codecs.hpp"

namespace loom {

namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

int64_t ns_of(steady::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

etcd_options options_of(const ha_config& c) {
  return {c.endpoints, c.tls, c.request_timeout_ms};
}

/// Keys read whole (a full sync) as the puts a watch would have reported.
std::vector<etcd_event> as_puts(std::vector<etcd_kv> kvs) {
  std::vector<etcd_event> out;
  out.reserve(kvs.size());
  for (auto& kv : kvs)
    out.push_back({false, std::move(kv)});
  return out;
}

/// The store holds decisions of its own (a service that ran before [ha] was configured).
bool holds_state(database& db) {
  for (auto kind : all_values<record_kind>())
    if (kind != record_kind::meta && kind != record_kind::events && db.count(kind) > 0)
      return true;
  return db.last_event_seq() > 0;
}

} // namespace

replica::replica(ha_config config, std::string metrics_address, std::shared_ptr<database> db,
                 std::shared_ptr<service_metrics> metrics)
  : replica(std::move(config), std::move(metrics_address), std::move(metrics)) {
  db_ = std::move(db);
}

replica::replica(ha_config config, std::string metrics_address,
                 std::shared_ptr<service_metrics> metrics)
  : config_(std::move(config)), metrics_address_(std::move(metrics_address)),
    keys_(config_.prefix), client_(options_of(config_)), metrics_(std::move(metrics)) {
  metrics_->ha_leader().Set(0);
  lease_thread_ = std::thread([this] { keep_lease(); });
}

replica::~replica() {
  stop_ = true;
  lease_wake_.notify_all();
  if (lease_thread_.joinable())
    lease_thread_.join();
  mirror_.reset();
}

steady::time_point replica::valid_until() const {
  return steady::time_point{std::chrono::nanoseconds{valid_until_ns_.load()}};
}

bool replica::leading() const {
  return leading_ && !term_over_ && steady::now() < valid_until();
}

// -- The lease ---------------------------------------------------------------------------------

void replica::keep_lease() {
  const auto ttl = std::chrono::seconds{config_.lease_ttl_s};
  auto published = steady::time_point{};
  while (!stop_) {
    const auto sent = steady::now(); // the lease runs at least until sent + ttl
    auto pause = std::chrono::milliseconds{250};
    if (lease_ == 0) {
      if (auto id = client_.grant(config_.lease_ttl_s)) {
        lease_ = *id;
        valid_until_ns_ = ns_of(sent + ttl);
        spdlog::info("event=ha_lease_granted replica={} lease={} ttl_s={}", config_.name, *id,
                     config_.lease_ttl_s);
        publish();
        published = steady::now();
        pause = std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 3;
      } else {
        metrics_->ha_etcd_errors().Increment();
        spdlog::debug("event=ha_lease_refused error=\"{}\"", render(id.error()));
      }
    } else if (auto left = client_.keep_alive(lease_); left && *left > 0) {
      valid_until_ns_ = ns_of(sent + ttl);
      pause = std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 3;
      if (steady::now() - published > 5s) {
        publish();
        published = steady::now();
      }
    } else if (left) {
      lose("its etcd lease expired");
      lease_ = 0;
      pause = 0ms;
    } else {
      metrics_->ha_etcd_errors().Increment();
      // Unknown whether etcd expired it (it cannot without a quorum): the term ends, and the
      // lease is renewed again if etcd comes back in time.
      if (steady::now() >= valid_until())
        suspend(fmt::format("it could not renew its lease within {} s ({})",
                            config_.lease_ttl_s, render(left.error())));
    }
    std::unique_lock lock{lease_mutex_};
    lease_wake_.wait_for(lock, pause, [this] { return stop_.load(); });
  }
}

void replica::lose(const std::string& why) {
  if (!leading_.exchange(false))
    return;
  term_over_ = true;
  metrics_->ha_leader().Set(0);
  metrics_->ha_leader_changes().Increment();
  spdlog::error("event=ha_deposed replica={} reason=\"{}\"", config_.name, why);
  // Where the key is still this leadership's (a diverged store), a standby need not wait for
  // the lease; elsewhere the compare fails and nothing changes.
  erase_election_key();
}

bool replica::erase_election_key() {
  etcd_op erase;
  erase.what = etcd_op::kind::erase;
  erase.key = keys_.leader();
  auto r = client_.txn({{keys_.leader(), leader_revision_}}, {erase});
  return r && r->succeeded;
}

void replica::suspend(const std::string& why) {
  if (!leading_ || term_over_.exchange(true))
    return;
  metrics_->ha_leader().Set(0);
  spdlog::warn("event=ha_suspended replica={} reason=\"{}\" note=\"it stops acting; it leads "
               "again on the same lease if etcd renews it in time, else another replica does\"",
               config_.name, why);
}

void replica::publish() {
  const auto lease = lease_.load();
  if (!lease)
    return;
  replica_status s;
  s.name = config_.name;
  s.role = leading_ ? ha_role::leader : ha_role::standby;
  s.advertise = config_.advertise;
  s.metrics = metrics_address_;
  s.applied_revision = applied_;
  s.pid = getpid();
  etcd_op put;
  put.key = keys_.replica(config_.name);
  put.value = encode_replica(s);
  put.lease = lease;
  if (auto r = client_.txn({}, {put}); !r)
    metrics_->ha_etcd_errors().Increment();
}

// -- Standing by: the mirror and the campaign ----------------------------------------------------

bool replica::stand_by(std::shared_ptr<database> db, const std::function<bool()>& stopping) {
  db_ = std::move(db);
  const bool elected = stand_by(stopping);
  db_.reset();
  return elected;
}

bool replica::stand_by(const std::function<bool()>& stopping) {
  metrics_->ha_leader().Set(0);
  // Where this store stands: what it applied before (a standby that mirrored, a leader whose
  // store wrote each commit's revision), or nothing.
  if (auto rev = db_->get(record_kind::meta, ha_revision_key); rev && *rev)
    applied_ = decode_ha_revision(**rev);
  else
    applied_ = 0;
  metrics_->ha_applied_revision().Set(double(applied_.load()));
  auto campaigned = steady::time_point{};
  while (!stopping()) {
    if (!mirror_error_.empty()) { // a store that cannot mirror this keyspace never leads
      std::this_thread::sleep_for(50ms);
      continue;
    }
    if (!mirror_ || resync_) {
      mirror_.reset();
      if (!start_mirror()) {
        std::this_thread::sleep_for(250ms);
        continue;
      }
    }
    const bool due = !leader_present_ || steady::now() - campaigned > std::chrono::seconds{
                                                                        config_.lease_ttl_s};
    if (lease_ && due && steady::now() >= campaign_after_) {
      campaigned = steady::now();
      if (campaign())
        return true;
    }
    std::unique_lock lock{mutex_};
    changed_.wait_for(lock, 50ms);
  }
  mirror_.reset();
  return false;
}

bool replica::start_mirror() {
  bool full = resync_ || applied_ == 0;
  resync_ = false;
  auto head = client_.range(keys_.leader());
  if (!head) {
    metrics_->ha_etcd_errors().Increment();
    return false;
  }
  if (applied_ > head->revision) { // this store mirrored another etcd (one rebuilt since)
    spdlog::warn("event=ha_store_ahead replica={} applied_revision={} etcd_revision={} "
                 "note=\"the whole keyspace is read again\"",
                 config_.name, applied_.load(), head->revision);
    full = true;
  }
  if (full && !full_sync())
    return false;
  mirror_ = std::make_unique<etcd_watch>(
    options_of(config_), keys_.all(), range_end(keys_.all()), applied_ + 1,
    [this](std::vector<etcd_event> events, int64_t revision) {
      apply(std::move(events), revision);
    },
    [this](etcd_watch::ending e) {
      if (e.compacted) {
        spdlog::warn("event=ha_mirror_compacted replica={} reason=\"{}\" note=\"the whole "
                     "keyspace is read again\"",
                     config_.name, e.error);
        resync_ = true;
      }
      changed_.notify_all();
    });
  return true;
}

bool replica::full_sync() {
  std::vector<etcd_kv> kvs;
  int64_t revision = 0;
  std::string from = keys_.all();
  const auto end = range_end(from);
  for (;;) {
    auto page = client_.range(from, end, revision, 1000);
    if (!page) {
      metrics_->ha_etcd_errors().Increment();
      spdlog::warn("event=ha_sync_failed replica={} error=\"{}\"", config_.name,
                   render(page.error()));
      return false;
    }
    if (!revision)
      revision = page->revision;
    const bool more = page->more && !page->kvs.empty();
    for (auto& kv : page->kvs)
      kvs.push_back(std::move(kv));
    if (!more)
      break;
    from = kvs.back().key + '\0';
  }
  auto update = mirror_writes(keys_, as_puts(std::move(kvs)));
  std::lock_guard lock{mutex_};
  if (!update.error.empty()) {
    mirror_error_ = update.error;
    spdlog::error("event=ha_mirror_failed replica={} reason=\"{}\"", config_.name, update.error);
    return false;
  }
  leader_present_ = update.leader.value_or(false);
  if (update.batches.empty() && holds_state(*db_)) {
    // [ha] on a service that ran alone: its store is the cluster's, and etcd gets it if this
    // replica leads first. Nothing is marked mirrored meanwhile.
    seed_pending_ = true;
    applied_ = revision;
    spdlog::warn("event=ha_seed_pending replica={} reason=\"etcd holds nothing of this cluster "
                 "and this store holds state: it goes to etcd if this replica leads first\"",
                 config_.name);
    return true;
  }
  if (auto err = db_->clear()) {
    mirror_error_ = render(err);
    return false;
  }
  if (auto err = write_applied(update.batches, revision, true)) {
    mirror_error_ = render(err);
    return false;
  }
  applied_ = revision;
  metrics_->ha_applied_revision().Set(double(revision));
  spdlog::info("event=ha_synced replica={} revision={} batches={} last_event_seq={}",
               config_.name, revision, update.batches.size(), db_->last_event_seq());
  return true;
}

caf::error replica::write_applied(const std::vector<write_batch>& batches, int64_t revision,
                                  bool mark_revision) {
  std::vector<const write_batch*> all;
  for (auto& b : batches)
    all.push_back(&b);
  write_batch mark;
  mark.sync = false; // etcd holds it: a store that loses its tail reads it again
  mark.records.push_back(ha_revision_write(revision));
  if (mark_revision)
    all.push_back(&mark);
  auto r = db_->write_all(all);
  return r ? caf::error{} : r.error();
}

void replica::apply(std::vector<etcd_event> events, int64_t revision) {
  std::lock_guard lock{mutex_};
  if (!mirror_error_.empty() || resync_)
    return;
  auto update = mirror_writes(keys_, events);
  if (!update.error.empty()) {
    mirror_error_ = update.error;
    spdlog::error("event=ha_mirror_failed replica={} reason=\"{}\"", config_.name, update.error);
    changed_.notify_all();
    return;
  }
  if (update.leader)
    leader_present_ = *update.leader;
  if (seed_pending_ && !update.batches.empty()) {
    seed_pending_ = false;
    resync_ = true;
    spdlog::warn("event=ha_seed_abandoned replica={} reason=\"another replica leads and wrote "
                 "to etcd first: this store becomes a copy of etcd\"",
                 config_.name);
    changed_.notify_all();
    return;
  }
  int64_t last = applied_;
  for (auto& e : events)
    last = std::max(last, e.kv.mod_revision);
  if (last > applied_) {
    if (auto err = write_applied(update.batches, last, !seed_pending_)) {
      mirror_error_ = render(err);
      spdlog::error("event=ha_mirror_failed replica={} reason=\"{}\"", config_.name,
                    mirror_error_);
      changed_.notify_all();
      return;
    }
    applied_ = last;
  }
  metrics_->ha_applied_revision().Set(double(applied_.load()));
  metrics_->ha_watch_lag().Set(double(std::max<int64_t>(0, revision - applied_)));
  changed_.notify_all();
}

bool replica::campaign() {
  replica_status s;
  s.name = config_.name;
  s.role = ha_role::leader;
  s.advertise = config_.advertise;
  s.metrics = metrics_address_;
  s.applied_revision = applied_;
  s.pid = getpid();
  etcd_op put;
  put.key = keys_.leader();
  put.value = encode_replica(s);
  put.lease = lease_;
  auto r = client_.txn({{keys_.leader(), 0}}, {put});
  if (!r) {
    metrics_->ha_etcd_errors().Increment();
    return false;
  }
  // Its own key, under its own lease: a term that was suspended goes on where it was.
  const bool reclaimed = !r->succeeded && !r->kvs.empty() && r->kvs.front().lease == lease_;
  if (!r->succeeded && !reclaimed) {
    leader_present_ = true;
    if (!r->kvs.empty())
      if (auto who = decode_replica(r->kvs.front().value); who && who->name != leader_name_) {
        leader_name_ = who->name;
        spdlog::info("event=ha_standing_by replica={} leader={} leader_endpoint={}",
                     config_.name, who->name, who->advertise);
      }
    return false;
  }
  leader_revision_ = reclaimed ? r->kvs.front().create_revision : r->revision;
  // Leading from here on (commits are fenced by that revision), once the store has applied
  // everything up to now: everything committed before is then in the store.
  leading_ = true;
  term_over_ = false;
  if (!wait_applied(r->revision)) {
    stand_down("its store did not catch up with etcd in time");
    mirror_.reset(); // watched again, from another endpoint
    return false;
  }
  mirror_.reset();
  if (seed_pending_)
    if (auto err = seed()) {
      stand_down(fmt::format("seeding etcd from its store failed: {}", render(err)));
      return false;
    }
  leader_name_ = config_.name;
  metrics_->ha_leader().Set(1);
  metrics_->ha_leader_changes().Increment();
  spdlog::info("event=ha_elected replica={} revision={} applied_revision={} endpoint={} "
               "same_term={}",
               config_.name, leader_revision_, applied_.load(), config_.advertise, reclaimed);
  publish();
  return true;
}

bool replica::wait_applied(int64_t revision) {
  std::unique_lock lock{mutex_};
  const auto deadline = steady::now() + std::chrono::seconds{2 * config_.lease_ttl_s};
  while (applied_ < revision) {
    if (!leading() || !mirror_error_.empty() || resync_ || steady::now() >= deadline)
      return false;
    changed_.wait_for(lock, 20ms);
  }
  return true;
}

caf::error replica::seed() {
  int64_t revision = applied_;
  auto send = [&](const write_batch& b, uint64_t first_seq) -> caf::error {
    auto r = commit({&b}, first_seq);
    if (!r)
      return r.error();
    revision = *r;
    return caf::none;
  };
  for (auto kind : all_values<record_kind>()) {
    if (kind == record_kind::events)
      continue;
    auto records = db_->scan(kind, "");
    if (!records)
      return records.error();
    write_batch b;
    for (auto& r : *records) {
      if (kind == record_kind::meta && (r.key == "store" || r.key == ha_revision_key))
        continue;
      b.records.push_back({kind, r.key, r.value, false});
      if (b.records.size() >= config_.max_txn_ops / 2) {
        if (auto err = send(b, 1))
          return err;
        b.records.clear();
      }
    }
    if (!b.records.empty())
      if (auto err = send(b, 1))
        return err;
  }
  // The events etcd keeps (the retention's window), at their own sequence numbers.
  const uint64_t last = db_->last_event_seq();
  uint64_t next =
    config_.event_retention && last > config_.event_retention ? last - config_.event_retention + 1
                                                              : 1;
  const uint64_t first = next;
  while (next <= last) {
    auto events = db_->read_events(next, config_.max_txn_ops / 2);
    if (!events)
      return events.error();
    if (events->empty())
      break;
    write_batch b;
    for (auto& e : *events)
      b.events.push_back(e.value);
    if (auto err = send(b, next))
      return err;
    next += events->size();
  }
  write_batch mark;
  mark.records.push_back(ha_revision_write(revision));
  if (auto r = db_->write(mark); !r)
    return r.error();
  seed_pending_ = false;
  spdlog::info("event=ha_seeded replica={} revision={} events={}", config_.name, revision,
               next - first);
  return caf::none;
}

// -- Leading: fenced commits ---------------------------------------------------------------------

void replica::stand_down(std::string_view why) {
  if (!leading_.exchange(false))
    return;
  term_over_ = true;
  metrics_->ha_leader().Set(0);
  metrics_->ha_leader_changes().Increment();
  const bool erased = erase_election_key();
  // Another replica's turn: this one campaigns again only if none has taken over meanwhile.
  campaign_after_ = steady::now() + std::chrono::seconds{config_.lease_ttl_s};
  spdlog::info("event=ha_stood_down replica={} reason=\"{}\" election_key_deleted={}",
               config_.name, why, erased);
  publish();
}

caf::expected<int64_t> replica::commit(const std::vector<const write_batch*>& batches,
                                       uint64_t first_seq) {
  auto not_leader = [this](std::string why) {
    return make_error(errc::not_leader,
                      fmt::format("replica '{}' does not lead ({}); nothing was stored",
                                  config_.name, why));
  };
  // A term that is over, suspended or lost, ends this replica's run and its state with it:
  // not_leader (STOPPING) sends the clients to the next leader, whose store alone says what
  // was kept. READ_ONLY would tell a worker to go on here, past a release no leader counts.
  auto suspended = [] {
    return make_error(errc::not_leader,
                      "etcd has not renewed this replica's lease (no quorum?): it stops acting; "
                      "nothing was stored, send it to the next leader");
  };
  if (!leading())
    return lost() ? not_leader("it stands by") : suspended();
  auto plan = plan_commit(keys_, batches, first_seq,
                          {config_.max_txn_ops, config_.max_request_bytes},
                          config_.event_retention);
  if (!plan.error.empty())
    return make_error(errc::invalid_argument, plan.error);
  const auto started = steady::now();
  const std::vector<etcd_compare> fence{{keys_.leader(), leader_revision_}};
  int64_t revision = 0;
  bool unresolved = false; // a transaction etcd may have taken without saying so
  for (auto& ops : plan.txns) {
    for (;;) {
      if (!leading()) {
        if (!revision && !unresolved)
          return lost() ? not_leader("another replica may lead now") : suspended();
        // etcd may take it later: this store must be brought up to etcd's before it is used.
        suspend("etcd did not confirm a commit before the lease ran out");
        return make_error(errc::not_leader,
                          "etcd did not confirm the write in time (no quorum?): it may or may "
                          "not be stored; this replica stops acting until etcd answers");
      }
      bool maybe = false;
      auto r = client_.txn(fence, ops, &maybe);
      if (r && r->succeeded) {
        revision = r->revision;
        break;
      }
      if (r) {
        lose("the election key is another replica's: a newer leader was elected");
        return not_leader("another replica was elected");
      }
      metrics_->ha_etcd_errors().Increment();
      unresolved |= maybe;
      if (!unresolved && !revision) // surely not applied: refused, nothing stored
        return make_error(code_of(r.error()) == errc::storage_full ? errc::storage_full
                                                                   : errc::storage_read_only,
                          fmt::format("etcd could not commit it ({}); nothing was stored, "
                                      "send it again later",
                                      message_of(r.error())));
      if (!unresolved) { // an earlier transaction of this commit landed, this one did not
        suspend("a group commit was cut short in etcd");
        return make_error(errc::not_leader,
                          "etcd took part of a group commit only; this replica stops acting "
                          "until its store has the rest");
      }
      // Unknown: the same transaction again settles it (its writes are idempotent, and it is
      // fenced), for as long as the lease holds.
      std::this_thread::sleep_for(100ms);
    }
  }
  metrics_->ha_commit_seconds().Observe(
    std::chrono::duration<double>(steady::now() - started).count());
  applied_ = revision;
  metrics_->ha_applied_revision().Set(double(revision));
  const int64_t keep = int64_t(config_.history_revisions);
  // History past `keep` revisions only serves a standby that fell that far behind (it reads
  // the keyspace again instead): dropped in steps of a tenth, so etcd holds at most 1.1 x keep.
  if (keep && revision - keep - compacted_to_ >= std::max<int64_t>(1, keep / 10)) {
    if (auto err = client_.compact(revision - keep))
      metrics_->ha_etcd_errors().Increment();
    else
      compacted_to_ = revision - keep;
  }
  return revision;
}

void replica::diverged(const caf::error& why) {
  lose(fmt::format("its store could not apply what etcd committed ({})", render(why)));
}

} // namespace loom
