#define BOOST_TEST_MODULE ha
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "ha/etcd.hpp"
#include "ha/keyspace.hpp"
#include "ha/replica.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "records/codecs.hpp"
#include "store/store_actor.hpp"
#include "tests/support/etcd_cluster.hpp"
#include "tests/support/process.hpp"

using namespace loom;
using namespace std::chrono_literals;

namespace {

write_batch batch(std::vector<record_write> records, std::vector<std::string> events) {
  write_batch b;
  b.records = std::move(records);
  b.events = std::move(events);
  return b;
}

/// What etcd does with a plan's ops, as the watch then reports them: puts as themselves,
/// a range's deletion as one DELETE per key it held.
std::vector<etcd_event> as_etcd_applies(const commit_plan& plan,
                                        std::map<std::string, std::string>& kv) {
  std::vector<etcd_event> out;
  int64_t rev = 1;
  for (auto& txn : plan.txns) {
    ++rev;
    for (auto& op : txn) {
      if (op.what == etcd_op::kind::put) {
        kv[op.key] = op.value;
        out.push_back({false, {op.key, op.value, rev, rev, 0}});
        continue;
      }
      auto end = op.range_end.empty() ? op.key + '\0' : op.range_end;
      for (auto it = kv.lower_bound(op.key); it != kv.end() && it->first < end;) {
        out.push_back({true, {it->first, {}, 0, rev, 0}});
        it = kv.erase(it);
      }
    }
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(keyspace_core)

BOOST_AUTO_TEST_CASE(range_end_covers_exactly_the_prefix) {
  BOOST_CHECK_EQUAL(range_end("/loom/a/"), "/loom/a0");
  BOOST_CHECK_EQUAL(range_end(std::string{"a\xff"}), "b");
  BOOST_CHECK_EQUAL(range_end(std::string{"\xff\xff"}), std::string(1, '\0'));
}

BOOST_AUTO_TEST_CASE(a_group_commit_packs_whole_batches_within_etcd_s_limits) {
  keyspace keys{"/loom/c"};
  // Ten batches of 5 writes each (3 records, 2 events): 12 ops at most per transaction, one
  // of them kept for the retention's deletion, so 2 batches a transaction.
  std::vector<write_batch> batches;
  for (int i = 0; i < 10; ++i)
    batches.push_back(batch({{record_kind::jobs, fmt::format("j{}", i), "v", false},
                             {record_kind::progress, fmt::format("j{}", i), "p", false},
                             {record_kind::groups, fmt::format("g{}", i), "", true}},
                            {fmt::format("e{}a", i), fmt::format("e{}b", i)}));
  std::vector<const write_batch*> all;
  for (auto& b : batches)
    all.push_back(&b);
  auto plan = plan_commit(keys, all, 41, {12, 1 << 20}, 50);
  BOOST_REQUIRE(plan.error.empty());
  BOOST_REQUIRE_EQUAL(plan.txns.size(), 5u);
  // 2 x 5 each, and the retention's deletion once the log is past 50 events (from 49-52 on).
  for (size_t i = 0; i < plan.txns.size(); ++i)
    BOOST_CHECK_EQUAL(plan.txns[i].size(), i < 2 ? 10u : 11u);
  // Events are numbered on from 41, in order; each transaction drops what falls out of 50.
  auto holds = [](const std::vector<etcd_op>& txn, const std::string& key) {
    return std::any_of(txn.begin(), txn.end(), [&](auto& op) { return op.key == key; });
  };
  BOOST_CHECK(holds(plan.txns[0], keys.event(41)));
  BOOST_CHECK(holds(plan.txns[4], keys.event(60)));
  auto& retention = plan.txns[4].back();
  BOOST_CHECK(retention.what == etcd_op::kind::erase);
  BOOST_CHECK_EQUAL(retention.key, keys.event(0));
  BOOST_CHECK_EQUAL(retention.range_end, keys.event(11)); // keeps 11..60
  BOOST_CHECK(plan.txns[0].back().what == etcd_op::kind::put); // 44 events: nothing falls out
}

// etcd refuses a transaction that names a key twice, or one inside a range it deletes; its
// writes land together, so a group commit sends what the last write of each key leaves.
BOOST_AUTO_TEST_CASE(a_group_commit_sends_each_key_once) {
  keyspace keys{"/loom/c"};
  // Three decisions rewrite the deployment record (as every admission rewrites the
  // scheduler's counter); the third drops every earlier step and writes the next.
  auto first = batch({{record_kind::gen_deployments, "d", "v1", false},
                      {record_kind::gen_steps, "d/0000000000000003", "s3", false}},
                     {"e1"});
  auto again = batch({{record_kind::gen_deployments, "d", "v2", false},
                      {record_kind::gen_deployments, "d", "v3", false}},
                     {"e2"});
  record_write earlier{record_kind::gen_steps, "d/0000000000000000", {}, true};
  earlier.erase_to = "d/0000000000000004";
  auto next = batch({earlier, {record_kind::gen_steps, "d/0000000000000004", "s4", false}},
                    {"e3"});
  auto plan = plan_commit(keys, {&first, &again, &next}, 1, {128, 1 << 20}, 0);
  BOOST_REQUIRE(plan.error.empty());
  BOOST_REQUIRE_EQUAL(plan.txns.size(), 1u);
  std::map<std::string, int> named;
  for (auto& op : plan.txns[0])
    ++named[op.key];
  for (auto& [key, n] : named)
    BOOST_CHECK_MESSAGE(n == 1, key << " named " << n << " times");
  BOOST_CHECK_EQUAL(plan.txns[0].size(), 1u + 2u + 3u); // the range, d, step 4, 3 events
  std::map<std::string, std::string> kv{{keys.record(record_kind::gen_steps, "d/0000000000000002"),
                                         "s2"}};
  auto update = mirror_writes(keys, as_etcd_applies(plan, kv));
  BOOST_CHECK_EQUAL(kv.at(keys.record(record_kind::gen_deployments, "d")), "v3");
  BOOST_CHECK_EQUAL(kv.count(keys.record(record_kind::gen_steps, "d/0000000000000002")), 0u);
  BOOST_CHECK_EQUAL(kv.count(keys.record(record_kind::gen_steps, "d/0000000000000003")), 0u);
  BOOST_CHECK_EQUAL(kv.at(keys.record(record_kind::gen_steps, "d/0000000000000004")), "s4");
  // A write inside a range an earlier decision deletes cannot merge: the next transaction's.
  auto late = batch({{record_kind::gen_steps, "d/0000000000000001", "s1", false}}, {"e4"});
  auto split = plan_commit(keys, {&next, &late}, 1, {128, 1 << 20}, 0);
  BOOST_REQUIRE_EQUAL(split.txns.size(), 2u);
  // ... and a decision that writes inside a range it deleted itself cannot be one at all.
  auto self_conflict = batch({earlier, {record_kind::gen_steps, "d/0000000000000001", "s", false}},
                             {});
  BOOST_CHECK(plan_commit(keys, {&self_conflict}, 1, {128, 1 << 20}, 0).error.find("inside a "
                                                                                   "range")
              != std::string::npos);
  // A retention shorter than a transaction's events never deletes the transaction's own.
  auto many = batch({}, {"a", "b", "c", "d", "e"});
  auto short_plan = plan_commit(keys, {&many}, 11, {128, 1 << 20}, 2);
  BOOST_CHECK_EQUAL(short_plan.txns[0].back().range_end, keys.event(11));
}

BOOST_AUTO_TEST_CASE(a_decision_too_large_for_one_transaction_is_refused_whole) {
  keyspace keys{"/loom/c"};
  write_batch big;
  for (int i = 0; i < 20; ++i)
    big.records.push_back({record_kind::jobs, fmt::format("j{}", i), "v", false});
  auto small = batch({{record_kind::jobs, "x", "v", false}}, {"e"});
  auto plan = plan_commit(keys, {&small, &big}, 1, {16, 1 << 20}, 0);
  BOOST_CHECK(plan.txns.empty());
  BOOST_CHECK(plan.error.find("max_txn_ops = 16") != std::string::npos);
  write_batch huge = batch({{record_kind::jobs, "h", std::string(200'000, 'x'), false}}, {});
  plan = plan_commit(keys, {&huge}, 1, {128, 65'536}, 0);
  BOOST_CHECK(plan.error.find("max_request_bytes = 65536") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_mirror_reads_back_what_a_commit_wrote) {
  keyspace keys{"/loom/c"};
  std::map<std::string, std::string> kv;
  auto first = batch({{record_kind::jobs, "a", "A1", false}, {record_kind::jobs, "b", "B1", false},
                      {record_kind::gen_steps, "d/0000000000000001", "s1", false},
                      {record_kind::gen_steps, "d/0000000000000001/0000000000000007", "f", false}},
                     {"e1", "e2"});
  record_write earlier{record_kind::gen_steps, "d/0000000000000000", {}, true};
  earlier.erase_to = "d/0000000000000002";
  auto second = batch({{record_kind::jobs, "a", {}, true}, earlier,
                       {record_kind::gen_steps, "d/0000000000000002", "s2", false}},
                      {"e3"});
  auto plan = plan_commit(keys, {&first, &second}, 1, {128, 1 << 20}, 2);
  auto update = mirror_writes(keys, as_etcd_applies(plan, kv));
  BOOST_REQUIRE(update.error.empty());
  BOOST_CHECK(!update.leader);
  // Applied in order to an empty store: b, the new step, and events 1-3 at their numbers.
  std::map<std::pair<record_kind, std::string>, std::string> store;
  std::map<uint64_t, std::string> log;
  for (auto& b : update.batches) {
    for (auto& r : b.records)
      if (r.erase)
        store.erase({r.kind, r.key});
      else
        store[{r.kind, r.key}] = r.value;
    for (size_t i = 0; i < b.events.size(); ++i)
      log[b.first_event_seq + i] = b.events[i];
  }
  decltype(store) expected{{{record_kind::jobs, "b"}, "B1"},
                           {{record_kind::gen_steps, "d/0000000000000002"}, "s2"}};
  BOOST_CHECK(store == expected);
  BOOST_CHECK((log == std::map<uint64_t, std::string>{{1, "e1"}, {2, "e2"}, {3, "e3"}}));
  // The next commit's retention deletes events 1 and 2 in etcd: the mirror's log keeps them.
  auto third = batch({}, {"e4"});
  auto later = mirror_writes(keys, as_etcd_applies(plan_commit(keys, {&third}, 4, {128, 1 << 20},
                                                               2),
                                                   kv));
  BOOST_CHECK(!kv.count(keys.event(1)) && !kv.count(keys.event(2)) && kv.count(keys.event(3)));
  BOOST_REQUIRE_EQUAL(later.batches.size(), 1u);
  BOOST_CHECK(later.batches[0].records.empty());
  BOOST_CHECK_EQUAL(later.batches[0].first_event_seq, 4u);
  // The election key and a record of a kind this binary does not know.
  auto leader = mirror_writes(keys, {{true, {keys.leader(), {}, 0, 9, 0}}});
  BOOST_CHECK(leader.leader && !*leader.leader);
  auto unknown = mirror_writes(keys, {{false, {"/loom/c/r/quotas/x", "v", 9, 9, 0}}});
  BOOST_CHECK(unknown.error.find("/loom/c/r/quotas/x") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// -- Against a real etcd ------------------------------------------------------------------------

namespace {

ha_config config_for(const test::etcd_cluster& etcd, const std::string& name, uint32_t ttl_s = 2) {
  ha_config c;
  c.endpoints = {etcd.url()};
  c.name = name;
  c.advertise = "tcp://127.0.0.1:1";
  c.prefix = "/loom/test";
  c.lease_ttl_s = ttl_s;
  c.request_timeout_ms = 500;
  return c;
}

std::shared_ptr<database> open_db(const std::string& path) {
  auto db = database::open(path);
  if (!db)
    BOOST_FAIL(render(db.error()));
  return std::shared_ptr<database>{std::move(*db)};
}

/// Stands by until elected, for at most `limit`.
bool elect(replica& r, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + test::scaled(limit);
  return r.stand_by([&] { return std::chrono::steady_clock::now() > deadline; });
}

/// What a store holds, every kind but its own metadata, and its log.
std::map<std::string, std::string> contents(database& db) {
  std::map<std::string, std::string> out;
  for (auto kind : all_values<record_kind>()) {
    if (kind == record_kind::events)
      continue;
    auto rows = db.scan(kind, "");
    BOOST_REQUIRE(rows);
    for (auto& r : *rows)
      if (kind != record_kind::meta || (r.key != "store" && r.key != ha_revision_key))
        out[fmt::format("{}/{}", to_string(kind), r.key)] = r.value;
  }
  auto events = db.read_events(1, 1'000'000);
  BOOST_REQUIRE(events);
  for (auto& e : *events)
    out[fmt::format("event/{}", event_seq(e.key))] = e.value;
  return out;
}

struct actor_world {
  actor_world() {
    register_loom_types(cfg);
    sys = std::make_unique<caf::actor_system>(cfg);
  }
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
};

/// Writes through a replicated store actor, as a service's actors do.
caf::expected<uint64_t> store_write(caf::actor_system& sys, const store_actor& st,
                                    write_batch b) {
  caf::scoped_actor self{sys};
  caf::expected<uint64_t> out{uint64_t{0}};
  self->request(st, caf::infinite, write_atom::value, std::move(b))
    .receive([&](uint64_t seq) { out = seq; }, [&](caf::error& err) { out = std::move(err); });
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(replicas_on_etcd)

BOOST_AUTO_TEST_CASE(a_standby_mirrors_every_commit_and_takes_over_holding_it) {
  test::etcd_cluster etcd;
  test::temp_dir dir;
  auto metrics = std::make_shared<service_metrics>();
  auto db_a = open_db(dir / "a");
  auto db_b = open_db(dir / "b");
  auto a = std::make_shared<replica>(config_for(etcd, "a"), "", db_a, metrics);
  BOOST_REQUIRE(elect(*a, 10s));
  replica b{config_for(etcd, "b"), "", db_b, std::make_shared<service_metrics>()};
  std::atomic<bool> b_elected{false};
  std::atomic<bool> stop_b{false};
  std::thread standby{[&] { b_elected = b.stand_by([&] { return stop_b.load(); }); }};
  {
    actor_world w;
    auto st = w.sys->spawn(replicated_store, db_a, metrics, a);
    for (int i = 0; i < 50; ++i) {
      auto seq = store_write(*w.sys, st,
                             batch({{record_kind::jobs, fmt::format("job-{}", i % 7),
                                     fmt::format("v{}", i), false},
                                    {record_kind::progress, "p", fmt::format("{}", i), i % 5 == 0}},
                                   {fmt::format("event {}", i)}));
      BOOST_REQUIRE_MESSAGE(seq, (seq ? std::string{} : render(seq.error())));
      BOOST_CHECK_EQUAL(*seq, uint64_t(i + 1));
    }
    caf::anon_send_exit(st, caf::exit_reason::user_shutdown);
  }
  // The standby's store becomes what the leader's is, record for record and event for event.
  const auto expected = contents(*db_a);
  BOOST_CHECK_EQUAL(expected.size(), 7u + 1u + 50u);
  const auto deadline = std::chrono::steady_clock::now() + test::scaled(10s);
  while (contents(*db_b) != expected && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  BOOST_CHECK(contents(*db_b) == expected);
  BOOST_CHECK(!b_elected);
  // The leader stands down: the standby leads with all of it, at once (no lease to wait out).
  const auto resigned = std::chrono::steady_clock::now();
  a->stand_down("the test");
  standby.join();
  BOOST_CHECK(b_elected);
  BOOST_CHECK(b.leading());
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - resigned, test::scaled(2s));
  BOOST_CHECK(contents(*db_b) == expected);
  BOOST_CHECK_EQUAL(db_b->last_event_seq(), 50u);
}

BOOST_AUTO_TEST_CASE(a_deposed_leader_can_commit_nothing) {
  test::etcd_cluster etcd;
  test::temp_dir dir;
  // A long lease: A's own renewals would not notice it is gone before its next write does.
  replica a{config_for(etcd, "a", 60), "", open_db(dir / "a"),
            std::make_shared<service_metrics>()};
  BOOST_REQUIRE(elect(a, 10s));
  auto one = batch({{record_kind::jobs, "from-a", "1", false}}, {"a1"});
  BOOST_REQUIRE(a.commit({&one}, 1));
  // A's lease ends under it (as when it stood still past its TTL); B is elected.
  etcd_client raw{{{etcd.url()}, {}, 1000}};
  auto key = raw.range("/loom/test/leader");
  BOOST_REQUIRE(key && !key->kvs.empty());
  BOOST_REQUIRE(!raw.revoke(key->kvs.front().lease));
  replica b{config_for(etcd, "b"), "", open_db(dir / "b"), std::make_shared<service_metrics>()};
  BOOST_REQUIRE(elect(b, 10s));
  // A still believes it leads (its clock says its lease runs): etcd's fence refuses it.
  BOOST_CHECK(a.leading());
  auto two = batch({{record_kind::jobs, "from-a-later", "2", false}}, {"a2"});
  auto refused = a.commit({&two}, 2);
  BOOST_REQUIRE(!refused);
  BOOST_CHECK(code_of(refused.error()) == errc::not_leader);
  BOOST_CHECK(message_of(refused.error()).find("another replica was elected") != std::string::npos);
  BOOST_CHECK(!a.leading());
  auto later = raw.range("/loom/test/r/jobs/from-a-later");
  BOOST_REQUIRE(later);
  BOOST_CHECK(later->kvs.empty());
  // ... and the new leader commits.
  auto three = batch({{record_kind::jobs, "from-b", "3", false}}, {"b1"});
  BOOST_CHECK(b.commit({&three}, 2));
}

BOOST_AUTO_TEST_CASE(months_of_decisions_stay_within_etcd_s_quota) {
  // etcd with a 32 MiB quota. 120,000 decisions of ~400 bytes (48 MB written): a job's record
  // rewritten, its event, and every 100th a new generation step that drops the last one's
  // records, committed 40 at a time. Kept: the live records, the newest 2,000 events and 200
  // revisions (8,000 decisions) of history. Without the retention and the compaction this
  // run stops at the quota (NOSPACE) near decision 58,000.
  test::etcd_cluster etcd{1, {"--quota-backend-bytes", std::to_string(32 << 20)}};
  test::temp_dir dir;
  auto cfg = config_for(etcd, "a", 10);
  cfg.event_retention = 2000;
  cfg.history_revisions = 200;
  replica a{cfg, "", open_db(dir / "a"), std::make_shared<service_metrics>()};
  BOOST_REQUIRE(elect(a, 10s));
  const int decisions = test::sanitized ? 20'000 : 120'000;
  const int per_commit = 40; // what the store's group commit gathers under load
  uint64_t seq = 1;
  int64_t half_size = 0;
  etcd_client raw{{{etcd.url()}, {}, 2000}};
  for (int i = 0; i < decisions; i += per_commit) {
    std::vector<write_batch> group;
    for (int k = i; k < i + per_commit; ++k) {
      auto b = batch({{record_kind::jobs, fmt::format("job-{}", k % 500), std::string(300, 'j'),
                       false}},
                     {fmt::format("event {} {}", k, std::string(60, 'e'))});
      if (k % 100 == 0) {
        record_write earlier{record_kind::gen_steps, fmt::format("d/{:016x}", 0), {}, true};
        earlier.erase_to = fmt::format("d/{:016x}", k);
        b.records.push_back(std::move(earlier));
        b.records.push_back({record_kind::gen_steps, fmt::format("d/{:016x}", k), "step", false});
      }
      group.push_back(std::move(b));
    }
    std::vector<const write_batch*> all;
    for (auto& b : group)
      all.push_back(&b);
    auto r = a.commit(all, seq);
    BOOST_REQUIRE_MESSAGE(r, "decision " << i << ": " << (r ? std::string{} : render(r.error())));
    seq += per_commit;
    if (i + per_commit >= decisions / 2 && !half_size)
      half_size = raw.status().front().db_size;
  }
  auto end = raw.status().front();
  auto keys = raw.range("/loom/test/", range_end("/loom/test/"));
  BOOST_REQUIRE(keys);
  BOOST_TEST_MESSAGE("etcd after " << decisions << " decisions: " << end.db_size
                                   << " bytes (in use " << end.db_size_in_use << "; "
                                   << half_size << " at half), " << keys->kvs.size() << " keys");
  BOOST_CHECK_LE(keys->kvs.size(), 500u + 2000u + 1u + 3u);
  BOOST_CHECK_LT(end.db_size, int64_t{32} << 20);
  // It stopped growing: the second half of the run added little to what the first left.
  BOOST_CHECK_LT(end.db_size, half_size * 3 / 2);
}

BOOST_AUTO_TEST_CASE(a_standby_behind_etcd_s_history_reads_the_keyspace_again) {
  test::etcd_cluster etcd;
  test::temp_dir dir;
  auto cfg = config_for(etcd, "a", 10);
  cfg.history_revisions = 100;
  auto db_a = open_db(dir / "a");
  auto db_b = open_db(dir / "b");
  {
    replica b{config_for(etcd, "b"), "", db_b, std::make_shared<service_metrics>()};
    replica a{cfg, "", db_a, std::make_shared<service_metrics>()};
    BOOST_REQUIRE(elect(a, 10s));
    BOOST_CHECK(!elect(b, 1s)); // B mirrors the start, then goes away
    uint64_t seq = 1;
    for (int i = 0; i < 1500; ++i) {
      auto one = batch({{record_kind::jobs, fmt::format("job-{}", i % 10), fmt::format("{}", i),
                         false}},
                       {fmt::format("e{}", i)});
      BOOST_REQUIRE(a.commit({&one}, seq));
      write_batch local = one;
      BOOST_REQUIRE(db_a->write(local)); // what the leader's store writes after each commit
      ++seq;
    }
    a.stand_down("the test");
  }
  // B comes back 1,500 revisions later, 1,400 of them compacted: it reads the keyspace again,
  // then leads holding the records and the events etcd kept.
  replica b{config_for(etcd, "b"), "", db_b, std::make_shared<service_metrics>()};
  BOOST_REQUIRE(elect(b, 10s));
  auto want = contents(*db_a);
  auto got = contents(*db_b);
  for (auto it = want.begin(); it != want.end();)
    it = it->first.rfind("event/", 0) == 0 && !got.count(it->first) ? want.erase(it) : ++it;
  BOOST_CHECK(got == want);
  BOOST_CHECK_EQUAL(db_b->last_event_seq(), 1500u);
  BOOST_CHECK_EQUAL(want.count("jobs/job-9"), 1u);
}

BOOST_AUTO_TEST_CASE(a_store_that_ran_alone_seeds_an_empty_keyspace) {
  test::etcd_cluster etcd;
  test::temp_dir dir;
  auto db_a = open_db(dir / "a");
  for (int i = 0; i < 30; ++i) // a service's decisions from before [ha]
    BOOST_REQUIRE(db_a->write(batch({{record_kind::jobs, fmt::format("j{}", i), "v", false}},
                                    {fmt::format("e{}", i)})));
  const auto before = contents(*db_a);
  replica a{config_for(etcd, "a"), "", db_a, std::make_shared<service_metrics>()};
  BOOST_REQUIRE(elect(a, 10s));
  BOOST_CHECK(contents(*db_a) == before); // nothing of it was dropped
  auto db_b = open_db(dir / "b");
  replica b{config_for(etcd, "b"), "", db_b, std::make_shared<service_metrics>()};
  BOOST_CHECK(!elect(b, 1s));
  BOOST_CHECK(contents(*db_b) == before);
}

BOOST_AUTO_TEST_SUITE_END()
