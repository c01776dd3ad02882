#define BOOST_TEST_MODULE store
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>
#include <csignal>
#include <rocksdb/db.h>

#include "loom.pb.h"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "records/codecs.hpp"
#include "store/database.hpp"
#include "store/store_actor.hpp"
#include "tests/support/process.hpp"

using namespace loom;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<database> open_ok(const std::string& path) {
  auto db = database::open(path);
  if (!db)
    BOOST_FAIL(render(db.error()));
  return std::move(*db);
}

std::string job_bytes(const std::string& id, uint32_t gpus) {
  v1::Job job;
  job.set_id(id);
  job.set_rollout_gpus(gpus);
  return job.SerializeAsString();
}


} // namespace

BOOST_AUTO_TEST_SUITE(database_core)

// A range's deletion (a deployment's earlier steps) survives a reopen that replays the WAL,
// within the acknowledged mark, and an empty range is no write at all.
BOOST_AUTO_TEST_CASE(range_deletions_replay_within_the_acknowledged_mark) {
  test::temp_dir dir;
  auto path = dir / "db";
  {
    auto db = open_ok(path);
    write_batch steps;
    for (auto k : {"d/1", "d/1/r", "d/2", "d/3"})
      steps.records.push_back({record_kind::gen_steps, k, "v", false});
    BOOST_REQUIRE(db->write(steps));
    write_batch next;
    record_write earlier{record_kind::gen_steps, "d/0", {}, true};
    earlier.erase_to = "d/3";
    record_write none{record_kind::gen_steps, "d/9", {}, true};
    none.erase_to = "d/9";
    next.records = {earlier, none, {record_kind::gen_steps, "d/4", "v", false}};
    next.events = {"step 4"};
    BOOST_REQUIRE(db->write(next));
  }
  auto db = open_ok(path); // replays the WAL: refused if it ended short of the mark
  auto rows = db->scan(record_kind::gen_steps, "");
  BOOST_REQUIRE(rows);
  std::vector<std::string> keys;
  for (auto& r : *rows)
    keys.push_back(r.key);
  BOOST_CHECK((keys == std::vector<std::string>{"d/3", "d/4"}));
  BOOST_CHECK_EQUAL(db->last_event_seq(), 1u);
}

BOOST_AUTO_TEST_CASE(records_and_events_survive_reopen) {
  test::temp_dir dir;
  auto path = dir / "db";
  {
    auto db = open_ok(path);
    BOOST_CHECK_EQUAL(db->last_event_seq(), 0u);
    write_batch b;
    b.records.push_back({record_kind::jobs, "job-a", job_bytes("job-a", 8), false});
    b.records.push_back({record_kind::jobs, "job-b", job_bytes("job-b", 16), false});
    b.records.push_back({record_kind::groups, "g1", "group", false});
    b.events = {"e1", "e2", "e3"};
    auto seq = db->write(b);
    BOOST_REQUIRE(seq);
    BOOST_CHECK_EQUAL(*seq, 3u);
    write_batch erase;
    erase.records.push_back({record_kind::jobs, "job-a", "", true});
    erase.events = {"e4"};
    BOOST_CHECK_EQUAL(*db->write(erase), 4u);
  }
  auto db = open_ok(path);
  BOOST_CHECK_EQUAL(db->last_event_seq(), 4u);
  BOOST_CHECK(!*db->get(record_kind::jobs, "job-a"));
  auto b = db->get(record_kind::jobs, "job-b");
  BOOST_REQUIRE(b && *b);
  v1::Job job;
  BOOST_REQUIRE(job.ParseFromString(**b));
  BOOST_CHECK_EQUAL(job.rollout_gpus(), 16u);
  BOOST_CHECK_EQUAL(db->count(record_kind::jobs), 1u);
  BOOST_CHECK_EQUAL(db->count(record_kind::groups), 1u);
  auto events = db->read_events(2, 10);
  BOOST_REQUIRE(events);
  BOOST_REQUIRE_EQUAL(events->size(), 3u);
  BOOST_CHECK_EQUAL((*events)[0].value, "e2");
  BOOST_CHECK_EQUAL(event_seq((*events)[2].key), 4u);
  // The next append continues the log after the reopen.
  write_batch more;
  more.events = {"e5"};
  BOOST_CHECK_EQUAL(*db->write(more), 5u);
}

BOOST_AUTO_TEST_CASE(scan_by_prefix_in_key_order) {
  test::temp_dir dir;
  auto db = open_ok(dir / "db");
  write_batch b;
  for (auto key : {"p/job-2", "p/job-1", "q/job-3", "p/job-10"})
    b.records.push_back({record_kind::placements, key, key, false});
  BOOST_REQUIRE(db->write(b));
  auto rows = db->scan(record_kind::placements, "p/");
  BOOST_REQUIRE(rows);
  BOOST_REQUIRE_EQUAL(rows->size(), 3u);
  BOOST_CHECK_EQUAL((*rows)[0].key, "p/job-1");
  BOOST_CHECK_EQUAL((*rows)[1].key, "p/job-10");
  BOOST_CHECK_EQUAL((*rows)[2].key, "p/job-2");
}

BOOST_AUTO_TEST_CASE(batch_is_all_or_nothing) {
  test::temp_dir dir;
  auto db = open_ok(dir / "db");
  write_batch b;
  b.records.push_back({record_kind::jobs, "job-a", "x", false});
  b.records.push_back({record_kind::events, "forged", "x", false}); // not allowed
  b.events = {"e1"};
  auto res = db->write(b);
  BOOST_REQUIRE(!res);
  BOOST_CHECK(code_of(res.error()) == errc::invalid_argument);
  BOOST_CHECK(!*db->get(record_kind::jobs, "job-a"));
  BOOST_CHECK_EQUAL(db->last_event_seq(), 0u);
}

BOOST_AUTO_TEST_CASE(locked_database_is_refused) {
  test::temp_dir dir;
  auto first = open_ok(dir / "db");
  auto second = database::open(dir / "db");
  BOOST_REQUIRE(!second);
  BOOST_CHECK(code_of(second.error()) == errc::storage_locked);
  BOOST_CHECK(render(second.error()).find("in use by another process") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(corrupted_database_is_refused) {
  test::temp_dir dir;
  { open_ok(dir / "db"); }
  test::write_file(dir / "db/CURRENT", "garbage");
  auto db = database::open(dir / "db");
  BOOST_REQUIRE(!db);
  BOOST_CHECK(code_of(db.error()) == errc::storage_corrupted);
  BOOST_CHECK(render(db.error()).find(dir / "db") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(newer_schema_is_refused) {
  test::temp_dir dir;
  { open_ok(dir / "db"); }
  {
    // Rewrite the metadata the way a future loom would, with plain RocksDB.
    std::vector<std::string> names;
    BOOST_REQUIRE(rocksdb::DB::ListColumnFamilies({}, dir / "db", &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (auto& n : names)
      cfs.emplace_back(n, rocksdb::ColumnFamilyOptions{});
    cfs.emplace_back("future_records", rocksdb::ColumnFamilyOptions{});
    rocksdb::DBOptions opts;
    opts.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* raw = nullptr;
    BOOST_REQUIRE(rocksdb::DB::Open(opts, dir / "db", cfs, &handles, &raw).ok());
    v1::StoreMeta meta;
    meta.set_schema_version(schema_version + 1);
    meta.set_created_by("loom 9.9.9");
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == "meta")
        BOOST_REQUIRE(raw->Put({}, handles[i], "store", meta.SerializeAsString()).ok());
    for (auto* h : handles)
      raw->DestroyColumnFamilyHandle(h);
    delete raw;
  }
  auto db = database::open(dir / "db");
  BOOST_REQUIRE(!db);
  BOOST_CHECK(code_of(db.error()) == errc::schema_too_new);
  BOOST_CHECK(render(db.error()).find("loom 9.9.9") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(store_actor_messages)

BOOST_AUTO_TEST_CASE(write_get_scan_flush) {
  test::temp_dir dir;
  caf::actor_system_config cfg;
  register_loom_types(cfg);
  caf::actor_system sys{cfg};
  auto metrics = std::make_shared<service_metrics>();
  auto st = sys.spawn(store, std::shared_ptr<database>{open_ok(dir / "db")}, metrics);
  caf::scoped_actor self{sys};
  write_batch b;
  b.records.push_back({record_kind::jobs, "job-1", job_bytes("job-1", 4), false});
  b.events = {"placed"};
  self->request(st, caf::infinite, write_atom::value, b)
    .receive([](uint64_t seq) { BOOST_CHECK_EQUAL(seq, 1u); },
             [](caf::error& err) { BOOST_FAIL(render(err)); });
  self->request(st, caf::infinite, get_atom::value, record_kind::jobs, std::string{"job-1"})
    .receive([](std::string& value) { BOOST_CHECK_EQUAL(value, job_bytes("job-1", 4)); },
             [](caf::error& err) { BOOST_FAIL(render(err)); });
  self->request(st, caf::infinite, get_atom::value, record_kind::jobs, std::string{"job-2"})
    .receive([](std::string&) { BOOST_FAIL("job-2 should not exist"); },
             [](caf::error& err) { BOOST_CHECK(code_of(err) == errc::not_found); });
  self->request(st, caf::infinite, scan_atom::value, record_kind::jobs, std::string{"job-"})
    .receive([](std::vector<stored_record>& rows) { BOOST_CHECK_EQUAL(rows.size(), 1u); },
             [](caf::error& err) { BOOST_FAIL(render(err)); });
  self->request(st, caf::infinite, events_atom::value, uint64_t{1}, uint64_t{10})
    .receive(
      [](std::vector<stored_record>& rows) {
        BOOST_REQUIRE_EQUAL(rows.size(), 1u);
        BOOST_CHECK_EQUAL(rows[0].value, "placed");
      },
      [](caf::error& err) { BOOST_FAIL(render(err)); });
  self->request(st, caf::infinite, flush_atom::value)
    .receive([](ok_atom) {}, [](caf::error& err) { BOOST_FAIL(render(err)); });
  BOOST_CHECK_EQUAL(metrics->store_batches().Value(), 1.0);
  BOOST_CHECK_EQUAL(metrics->store_writes("jobs").Value(), 1.0);
  BOOST_CHECK_EQUAL(metrics->store_syncs().Value(), 1.0);
  self->send_exit(st, caf::exit_reason::user_shutdown);
  self->wait_for(st);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(sigkill_loses_no_acknowledged_write) {
  test::temp_dir dir;
  auto path = dir / "db";
  const char* helper = std::getenv("LOOM_STORE_WRITER");
  BOOST_REQUIRE_MESSAGE(helper, "LOOM_STORE_WRITER not set");
  uint64_t acked = 0;
  bool any = false;
  {
    test::child_process child{{helper, path}};
    // Let a few hundred synced writes be acknowledged, then kill without warning.
    auto line = child.read_until(
      false, [](const std::string& l) { return l == "ack 300"; }, 120s);
    BOOST_REQUIRE_MESSAGE(line, "writer stopped early: " << child.stderr_text());
    child.send_signal(SIGKILL);
    auto status = child.wait(30s);
    BOOST_REQUIRE(status);
    BOOST_CHECK_EQUAL(*status, 128 + SIGKILL);
    // Acks printed before the kill count too: drain what the pipe still holds.
    child.drain(5s);
    for (auto& l : child.stdout_lines()) {
      if (l.rfind("ack ", 0) == 0) {
        acked = std::stoull(l.substr(4));
        any = true;
      }
    }
  }
  BOOST_REQUIRE(any);
  BOOST_TEST_MESSAGE("writer acknowledged jobs 0.." << acked << " before SIGKILL");
  auto db = open_ok(path);
  for (uint64_t i = 0; i <= acked; ++i) {
    auto id = "job-" + std::to_string(i);
    auto value = db->get(record_kind::jobs, id);
    BOOST_REQUIRE(value);
    BOOST_REQUIRE_MESSAGE(*value, "acknowledged " << id << " was lost");
    v1::Job job;
    BOOST_REQUIRE(job.ParseFromString(**value));
    BOOST_CHECK_EQUAL(job.id(), id);
    BOOST_CHECK_EQUAL(job.rollout_gpus(), static_cast<uint32_t>(i % 64 + 1));
  }
  // One event per acknowledged job, in order.
  BOOST_CHECK_GE(db->last_event_seq(), acked + 1);
}

BOOST_AUTO_TEST_SUITE(codecs)

BOOST_AUTO_TEST_CASE(events_carry_their_kind_as_enum_and_text_and_read_back) {
  auto bytes = encode_event(42, {event_kind::fabric_commit_failed, "rl-job", "version=3"});
  auto e = decode_event(bytes);
  BOOST_REQUIRE(e);
  BOOST_CHECK_EQUAL(e->time_ns, 42);
  BOOST_CHECK_EQUAL(e->event.kind, event_kind::fabric_commit_failed);
  BOOST_CHECK_EQUAL(e->event.subject, "rl-job");
  BOOST_CHECK_EQUAL(e->event.detail, "version=3");
  v1::Event raw;
  BOOST_REQUIRE(raw.ParseFromString(bytes));
  BOOST_CHECK_EQUAL(raw.kind(), "fabric_commit_failed"); // readable by v1 readers from before
  // A record from before the enum has only the text.
  raw.clear_event_kind();
  raw.set_kind("job_placed");
  BOOST_CHECK_EQUAL(decode_event(raw.SerializeAsString())->event.kind, event_kind::job_placed);
  raw.set_kind("job_teleported");
  BOOST_CHECK(!decode_event(raw.SerializeAsString()));
}

BOOST_AUTO_TEST_CASE(job_records_keep_every_state_and_v1_states_read_as_placed) {
  rl_job j{"A", 8, 16, 100, 200, 1.5, 300, 150, 12};
  j.model_gb = 29.5;
  j.iterations = 40;
  for (auto state : all_values<job_state>()) {
    auto back = decode_job(encode_job({j, state, "g3", "why"}));
    BOOST_REQUIRE(back);
    BOOST_CHECK_EQUAL(back->state, state);
    BOOST_CHECK_EQUAL(back->job.training_gpus, 16);
    BOOST_CHECK_EQUAL(back->job.iterations, 40);
    BOOST_CHECK_CLOSE(back->job.sync_s, 12.0, 1e-9);
  }
  v1::Job running;
  running.set_id("B");
  running.set_state(v1::JOB_STATE_RUNNING);
  BOOST_CHECK_EQUAL(decode_job(running.SerializeAsString())->state, job_state::placed);
  running.set_state(v1::JOB_STATE_UNSPECIFIED);
  BOOST_CHECK(!decode_job(running.SerializeAsString()));
}

BOOST_AUTO_TEST_CASE(a_device_plan_reads_back_and_old_text_stages_are_understood) {
  device_plan_record rec{"agg0", 7, fabric_stage::gen,
                         {{1, 2, "rl-job", 7, fabric_stage::gen},
                          {3, 4, "other", 5, fabric_stage::weight_sync}},
                         {{1, 18}, {2, 17}}};
  auto back = decode_device_plan(encode_device_plan(rec));
  BOOST_REQUIRE(back);
  BOOST_CHECK_EQUAL(back->device, "agg0");
  BOOST_CHECK_EQUAL(back->version, 7u);
  BOOST_CHECK_EQUAL(back->stage, fabric_stage::gen);
  BOOST_REQUIRE_EQUAL(back->circuits.size(), 2u);
  BOOST_CHECK_EQUAL(back->circuits[1].owner, "other");
  BOOST_CHECK_EQUAL(back->circuits[1].stage, fabric_stage::weight_sync);
  BOOST_CHECK(back->cross_connects == rec.cross_connects);
  v1::CircuitPlan old;
  old.set_device("core0");
  auto* c = old.add_circuits();
  c->set_a(1);
  c->set_b(2);
  c->set_owner("x");
  c->set_stage("grad-sync");
  BOOST_CHECK_EQUAL(decode_device_plan(old.SerializeAsString())->circuits[0].stage,
                    fabric_stage::train_grad_sync);
}

BOOST_AUTO_TEST_CASE(an_opus_job_reads_back_with_its_traces_and_topology) {
  opus_job_record rec{{"llama", 2, {2}, {"rail0", "rail1"}, "11", {{0, {1, 0, 1}}, {1, {0, 1}}}},
                      "01"};
  auto back = decode_opus_job(encode_opus_job(rec));
  BOOST_REQUIRE(back);
  BOOST_CHECK_EQUAL(back->job.job, "llama");
  BOOST_CHECK_EQUAL(back->job.pp, 2);
  BOOST_CHECK(back->job.symmetrical == rec.job.symmetrical);
  BOOST_CHECK(back->job.rails == rec.job.rails);
  BOOST_CHECK_EQUAL(back->job.initial, "11");
  BOOST_REQUIRE_EQUAL(back->job.traces.size(), 2u);
  BOOST_CHECK_EQUAL(back->job.traces[1].stage, 1);
  BOOST_CHECK(back->job.traces[0].digits == rec.job.traces[0].digits);
  BOOST_CHECK_EQUAL(back->topo, "01");
  BOOST_CHECK(!decode_opus_job("not a record"));
}

BOOST_AUTO_TEST_SUITE_END()
