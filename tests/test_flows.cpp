// Message flows, asserted one message at a time with CAF's test DSL on its deterministic
// scheduler: the real actors (scheduler, executor, fabric controller, emulated OCS) and a real
// RocksDB store, with the worker edge played by the test.

#define CAF_SUITE flows
#include <caf/test/dsl.hpp>
#include <caf/test/unit_test_impl.hpp>

#include "drivers/ocs_driver.hpp"
#include "fabric/fabric_controller.hpp"
#include "metrics/metrics.hpp"
#include "protocol/actors.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "records/codecs.hpp"
#include "scheduler/cluster_scheduler.hpp"
#include "scheduler/group_executor.hpp"
#include "store/store_actor.hpp"
#include "tests/support/fabric_fixtures.hpp"
#include "tests/support/process.hpp"

namespace loom {

// The DSL compares expected message contents element by element.
bool operator==(const phase_grant& x, const phase_grant& y) {
  return x.job == y.job && x.phase == y.phase && x.gpus == y.gpus && x.switch_s == y.switch_s
         && x.cold == y.cold;
}

} // namespace loom

using namespace loom;

namespace {

struct loom_config : caf::actor_system_config {
  loom_config() {
    register_loom_types(*this);
  }
};

/// A worker edge that does nothing by itself: the test speaks for it.
worker_actor::behavior_type silent_worker() {
  return {
    [](join_atom, const member_joined&) {},
    [](run_atom, const phase_grant&) {},
    [](resize_atom, const gpu_resize&) {},
    [](leave_atom, const std::string&, job_state) {},
  };
}

struct fixture : test_coordinator_fixture<loom_config> {
  test::temp_dir dir;
  store_actor store_handle;

  fixture() {
    auto db = database::open(dir / "store");
    CAF_REQUIRE(db);
    store_handle = sys.spawn(store, std::shared_ptr<database>{std::move(*db)},
                             std::make_shared<service_metrics>());
    run();
  }

  ~fixture() override {
    caf::anon_send_exit(store_handle, caf::exit_reason::user_shutdown);
  }

  /// A scheduler of one_node_cluster() on the fixture's store, started.
  cluster_scheduler_actor one_node_scheduler(worker_actor worker) {
    cluster_scheduler_config cfg{one_node_cluster(), weave_policy{}, true, true, {}, {}};
    auto scheduler = sys.spawn(cluster_scheduler, cfg, store_handle, worker, observer_actor{});
    run();
    return scheduler;
  }

  /// One node of 8 GPUs per pool: any job of 8 and 8 GPUs gets a new group.
  static cluster one_node_cluster() {
    cluster c;
    c.name = "flows";
    c.cross_link_gbps = 20;
    c.gpus = builtin_gpus();
    c.rollout = {{"r0", pool_kind::rollout, "H20", 8, 2048}};
    c.training = {{"t0", pool_kind::training, "H800", 8, 2048}};
    return c;
  }
};

} // namespace

CAF_TEST_FIXTURE_SCOPE(weave_flow, fixture)

CAF_TEST(submit_place_join_grant_release) {
  auto worker = sys.spawn(silent_worker);
  weave_policy policy;
  cluster_scheduler_config cfg{one_node_cluster(), policy, true, true, {}, {}};
  auto scheduler = sys.spawn(cluster_scheduler, cfg, store_handle, worker, observer_actor{});
  run();
  rl_job job{"A", 8, 8, 100, 100, 1.5, 100, 50, 0};
  job.iterations = 1;
  // Submit: Algorithm 1 decides, the decision is written (durably: the store commits what is
  // queued when it drains) before anyone hears it.
  self->send(scheduler, submit_atom::value, job);
  expect((submit_atom, rl_job), from(self).to(scheduler).with(submit_atom::value, _));
  expect((write_atom, write_batch), from(scheduler).to(store_handle).with(write_atom::value, _));
  expect((drain_atom), from(store_handle).to(store_handle).with(drain_atom::value));
  expect((uint64_t), from(store_handle).to(scheduler).with(_));
  // Then the job joins its group's executor, and the client hears the placement.
  using scheduler_impl =
    std::remove_pointer_t<cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>>;
  auto& st = deref<scheduler_impl>(scheduler).state;
  CAF_REQUIRE_EQUAL(st.executors.size(), 1u);
  auto executor = st.executors.begin()->second;
  expect((join_atom, loom::group_member), from(scheduler).to(executor).with(join_atom::value, _));
  expect((placement_reply), from(scheduler).to(self).with(_));
  // The executor tells the worker edge; nothing runs until the edge says the job's state is
  // staged (WEAVE §5.1 Init). No timer stands in for it.
  expect((join_atom, member_joined), from(executor).to(worker).with(join_atom::value, _));
  CAF_CHECK(!sched.has_pending_timeout());
  inject((staged_atom, std::string), from(worker).to(executor).with(staged_atom::value, "A"));
  // Its place in the turn order is written; its first run permit, for iteration 1 of group g1,
  // is a warm start, 100 GB from host DRAM over 8 GPUs at 25 GB/s each.
  expect((write_atom, write_batch), from(executor).to(store_handle).with(write_atom::value, _));
  expect((drain_atom), from(store_handle).to(store_handle).with(drain_atom::value));
  expect((run_atom, phase_grant), from(executor).to(worker)
                                     .with(run_atom::value,
                                           phase_grant{"A", phase_kind::rollout, 8, 0.5, false, 1, "g1"}));
  expect((uint64_t), from(store_handle).to(executor).with(_));
  expect((progress_atom, job_progress), from(executor).to(scheduler).with(progress_atom::value, _));
  expect((ok_atom), from(scheduler).to(executor).with(_));
  // The worker's releases (the test sends them and hears the answers) go straight back to
  // the executor: training, then sync, is permitted.
  inject((done_atom, std::string, phase_kind, double),
         from(self).to(executor).with(done_atom::value, "A", phase_kind::rollout, 90.0));
  expect((run_atom, phase_grant), from(executor).to(worker)
                                     .with(run_atom::value,
                                           phase_grant{"A", phase_kind::training, 8, 0.5, false, 1, "g1"}));
  // A report of a phase the job is not running is refused, not applied.
  inject((done_atom, std::string, phase_kind, double),
         from(self).to(executor).with(done_atom::value, "A", phase_kind::sync, 1.0));
  inject((done_atom, std::string, phase_kind, double),
         from(self).to(executor).with(done_atom::value, "A", phase_kind::training, 45.0));
  self->receive([](ok_atom) {}); // the rollout's report
  self->receive([](ok_atom) { CAF_FAIL("a sync before training was applied"); },
                [](const caf::error& err) { CAF_CHECK(code_of(err) == errc::out_of_turn); });
  self->receive([](ok_atom) {});
  expect((run_atom, phase_grant), from(executor).to(worker)
                                     .with(run_atom::value,
                                           phase_grant{"A", phase_kind::sync, 0, 0, false, 1, "g1"}));
  // The sync ends its only iteration: the job leaves, the scheduler durably finishes it, and
  // the emptied group's executor stops.
  inject((done_atom, std::string, phase_kind, double),
         from(self).to(executor).with(done_atom::value, "A", phase_kind::sync, 1.0));
  // Its final count goes ahead of the finish, so that the job's record keeps it.
  expect((progress_atom, job_progress),
         from(executor).to(scheduler).with(progress_atom::value, _));
  expect((leave_atom, std::string, job_state),
         from(executor).to(worker).with(leave_atom::value, "A", job_state::finished));
  expect((finish_atom, std::string), from(executor).to(scheduler).with(finish_atom::value, "A"));
  expect((ok_atom), from(scheduler).to(executor).with(_));
  expect((leave_atom, std::string, job_state),
         from(scheduler).to(executor).with(leave_atom::value, "A", job_state::finished));
  expect((write_atom, write_batch), from(scheduler).to(store_handle).with(write_atom::value, _));
  expect((drain_atom), from(store_handle).to(store_handle).with(drain_atom::value));
  expect((uint64_t), from(store_handle).to(scheduler).with(_));
  expect((caf::exit_msg), from(scheduler).to(executor).with(_));
  CAF_CHECK(st.executors.empty());
  CAF_CHECK(st.jobs.at("A").state == job_state::finished);
  CAF_CHECK_EQUAL(st.jobs.at("A").iterations_done, 1); // kept (and written) with the finish
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

/// An operator cancels a job while its sync release's progress is on its way to the disk: the
/// departure writes the count the scheduler holds, so the release it lacks is answered
/// JOB_ENDED, not acknowledged (the job then counts what Loom's record says).
CAF_TEST(a_cancel_that_overtakes_a_release_leaves_that_release_unacknowledged) {
  auto worker = sys.spawn(silent_worker);
  auto scheduler = one_node_scheduler(worker);
  for (auto name : {"A", "B"}) { // one group: the executor outlives A's departure
    rl_job job{name, 8, 8, 100, 100, 1.5, 100, 50, 0};
    job.iterations = 5;
    self->send(scheduler, submit_atom::value, job);
    sched.run(); // messages only: no phase deadline fires
    self->receive([](const placement_reply&) {});
  }
  using scheduler_impl =
    std::remove_pointer_t<cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>>;
  auto& st = deref<scheduler_impl>(scheduler).state;
  CAF_REQUIRE_EQUAL(st.executors.size(), 1u);
  auto executor = st.executors.begin()->second;
  for (auto name : {"A", "B"})
    self->send(executor, staged_atom::value, std::string{name});
  sched.run();
  for (auto phase : {phase_kind::rollout, phase_kind::training}) {
    self->send(executor, done_atom::value, std::string{"A"}, phase, 10.0);
    sched.run();
    self->receive([](ok_atom) {});
  }
  self->send(executor, done_atom::value, std::string{"A"}, phase_kind::sync, 1.0);
  expect((done_atom, std::string, phase_kind, double),
         from(self).to(executor).with(done_atom::value, "A", phase_kind::sync, 1.0));
  self->send(scheduler, cancel_atom::value, std::string{"A"});
  expect((cancel_atom, std::string), from(self).to(scheduler).with(cancel_atom::value, "A"));
  sched.run();
  bool release_refused = false;
  for (int i = 0; i < 2; ++i)
    self->receive([](ok_atom) {}, [&](const caf::error& err) {
      release_refused = code_of(err) == errc::job_ended;
    });
  CAF_CHECK(release_refused);
  CAF_CHECK(st.jobs.at("A").state == job_state::cancelled);
  CAF_CHECK_EQUAL(st.jobs.at("A").iterations_done, 0);
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

/// A cancel that arrives while the job's placement is on its way to the disk (a submission
/// here; a consolidation move or a profiled job's placement take the same path) waits for it
/// and cancels the job, instead of answering that there is no such job or that it is moved.
CAF_TEST(a_cancel_during_a_placement_cancels_the_placed_job) {
  auto worker = sys.spawn(silent_worker);
  auto scheduler = one_node_scheduler(worker);
  rl_job job{"A", 8, 8, 100, 100, 1.5, 100, 50, 0};
  self->send(scheduler, submit_atom::value, job);
  self->send(scheduler, cancel_atom::value, std::string{"A"});
  expect((submit_atom, rl_job), from(self).to(scheduler).with(submit_atom::value, _));
  expect((cancel_atom, std::string), from(self).to(scheduler).with(cancel_atom::value, "A"));
  sched.run();
  self->receive([](const placement_reply& r) { CAF_CHECK(r.kind == placement_kind::new_group); });
  self->receive([](ok_atom) {},
                [](const caf::error& err) { CAF_FAIL("cancel refused: " << to_string(err)); });
  using scheduler_impl =
    std::remove_pointer_t<cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>>;
  CAF_CHECK(deref<scheduler_impl>(scheduler).state.jobs.at("A").state == job_state::cancelled);
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

CAF_TEST(a_submission_repeated_while_the_first_is_persisted_gets_the_same_answer) {
  auto worker = sys.spawn(silent_worker);
  auto scheduler = one_node_scheduler(worker);
  rl_job job{"A", 8, 8, 100, 100, 1.5, 100, 50, 0};
  self->send(scheduler, submit_atom::value, job);
  self->send(scheduler, submit_atom::value, job);
  // The first is decided and on its way to the disk; the second arrives meanwhile and waits.
  expect((submit_atom, rl_job), from(self).to(scheduler).with(submit_atom::value, _));
  expect((submit_atom, rl_job), from(self).to(scheduler).with(submit_atom::value, _));
  expect((write_atom, write_batch), from(scheduler).to(store_handle).with(write_atom::value, _));
  expect((drain_atom), from(store_handle).to(store_handle).with(drain_atom::value));
  expect((uint64_t), from(store_handle).to(scheduler).with(_));
  run();
  // One decision, written once, answered twice the same way.
  for (int i = 0; i < 2; ++i)
    self->receive([](const placement_reply& r) {
      CAF_CHECK(r.kind == placement_kind::new_group);
      CAF_CHECK_EQUAL(r.group, "g1");
    });
  using scheduler_impl =
    std::remove_pointer_t<cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>>;
  CAF_CHECK_EQUAL(deref<scheduler_impl>(scheduler).state.engine->groups().size(), 1u);
  // Once placed, the name is taken.
  self->send(scheduler, submit_atom::value, job);
  run();
  self->receive([](const placement_reply&) { CAF_FAIL("placed twice"); },
                [](const caf::error& err) { CAF_CHECK(code_of(err) == errc::already_exists); });
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

CAF_TEST(restart_keeps_what_was_decided_and_places_again_only_what_was_drifting) {
  auto worker = sys.spawn(silent_worker);
  rl_job placed{"A", 8, 8, 100, 100, 1.5, 100, 50, 0};
  rl_job drifting = placed;
  drifting.id = "B";
  rl_job finished = placed;
  finished.id = "C";
  cluster c = one_node_cluster();
  c.rollout.push_back({"r1", pool_kind::rollout, "H20", 8, 2048});
  c.training.push_back({"t1", pool_kind::training, "H800", 8, 2048});
  weave_policy alone; // one job per group: B needs a group of its own
  alone.max_group_size = 1;
  cluster_scheduler_config cfg{c, alone, true, true, {}, {}};
  // A was placed on the second nodes as g3 and ran 5 iterations; ids went up to g6 before.
  cfg.restore.jobs = {{"A", encode_job({placed, job_state::placed, "g3", ""})},
                      {"B", encode_job({drifting, job_state::drifted, "", "measured"})},
                      {"C", encode_job({finished, job_state::finished, "", ""})}};
  cfg.restore.groups = {{"g3", encode_group({"g3", {"A"}, {"r1"}, {"t1"}})}};
  cfg.restore.placements = {{"A", encode_placement({"A", "g3", {{"r1", 8}}, {{"t1", 8}}})}};
  cfg.restore.progress = {{"A", encode_progress({"A", "g3", 0, 7, 5})}};
  cfg.restore.meta = encode_scheduler_meta({7, {}});
  auto scheduler = sys.spawn(cluster_scheduler, cfg, store_handle, worker, observer_actor{});
  sched.prioritize(scheduler);
  sched.run_once(); // it starts: the records are taken back
  using scheduler_impl =
    std::remove_pointer_t<cluster_scheduler_actor::stateful_pointer<cluster_scheduler_state>>;
  auto& st = deref<scheduler_impl>(scheduler).state;
  // A's group comes back without its executor until something needs it; only B is decided
  // (and written) again.
  CAF_CHECK_EQUAL(st.executors.count(3), 0u);
  CAF_CHECK_EQUAL(st.dormant.count(3), 1u);
  expect((write_atom, write_batch), from(scheduler).to(store_handle).with(write_atom::value, _));
  expect((drain_atom), from(store_handle).to(store_handle).with(drain_atom::value));
  run();
  CAF_CHECK(st.jobs.at("A").state == job_state::placed);
  CAF_CHECK_EQUAL(st.jobs.at("A").group, 3u);
  CAF_CHECK(st.jobs.at("B").state == job_state::placed);
  CAF_CHECK_EQUAL(st.jobs.at("B").group, 7u); // group ids are never reused
  CAF_CHECK(st.jobs.at("C").state == job_state::finished);
  CAF_CHECK_EQUAL(st.engine->jobs(), 2u);
  // Asked where A stands (as the gateway asks for a worker's first request), the scheduler
  // spawns g3's executor, which takes A back first, with its turn and count; it resumes its
  // count once A's workers say it is staged.
  self->send(scheduler, job_atom::value, std::string{"A"});
  expect((job_atom, std::string), from(self).to(scheduler).with(job_atom::value, _));
  CAF_REQUIRE_EQUAL(st.executors.count(3), 1u);
  CAF_CHECK_EQUAL(st.dormant.count(3), 0u);
  expect((restore_atom, loom::group_member, job_progress),
         from(scheduler).to(st.executors.at(3)).with(restore_atom::value, _, _));
  run();
  self->receive([](const job_status& s) {
    CAF_CHECK_EQUAL(s.member.iterations_done, 5);
    CAF_CHECK(!s.member.staged);
  });
  caf::anon_send_exit(scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(store_flow, fixture)

CAF_TEST(writes_queued_together_are_committed_with_one_sync) {
  auto db = database::open(dir / "group");
  CAF_REQUIRE(db);
  auto metrics = std::make_shared<service_metrics>();
  auto st = sys.spawn(store, std::shared_ptr<database>{std::move(*db)}, metrics);
  run();
  auto batch = [](std::string key, bool sync) {
    write_batch b;
    b.sync = sync;
    b.records.push_back({record_kind::jobs, std::move(key), "v", false});
    b.events.push_back("e");
    return b;
  };
  // Three writers' batches are in the mailbox before the store turns to the first.
  self->send(st, write_atom::value, batch("a", true));
  self->send(st, write_atom::value, batch("b", false));
  self->send(st, write_atom::value, batch("c", true));
  for (int i = 0; i < 3; ++i)
    expect((write_atom, write_batch), from(self).to(st).with(write_atom::value, _));
  CAF_CHECK_EQUAL(metrics->store_batches().Value(), 0.0); // queued, nobody answered yet
  expect((drain_atom), from(st).to(st).with(drain_atom::value));
  // One atomic write, one WAL sync; each writer hears its own last event sequence.
  CAF_CHECK_EQUAL(metrics->store_syncs().Value(), 1.0);
  CAF_CHECK_EQUAL(metrics->store_batches().Value(), 3.0);
  for (uint64_t expected = 1; expected <= 3; ++expected)
    self->receive([&](uint64_t seq) { CAF_CHECK_EQUAL(seq, expected); });
  // A read sees a write sent before it, even one still queued.
  self->send(st, write_atom::value, batch("d", false));
  self->send(st, get_atom::value, record_kind::jobs, std::string{"d"});
  run();
  self->receive([](uint64_t seq) { CAF_CHECK_EQUAL(seq, 4u); });
  self->receive([](const std::string& v) { CAF_CHECK_EQUAL(v, "v"); });
  caf::anon_send_exit(st, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(fabric_flow, fixture)

CAF_TEST(intent_materialise_apply_persist_answer) {
  auto model = test::two_pods(2);
  emulated_ocs_config oc;
  oc.latency = {25, 25};
  std::map<std::string, ocs_driver_actor> drivers;
  std::map<std::string, emulated_ocs_actor> devices;
  for (auto& d : model.devices) {
    oc.device = d.id;
    oc.size = {d.ports, d.ports};
    devices[d.id] = sys.spawn(emulated_ocs, oc);
    drivers[d.id] = caf::actor_cast<ocs_driver_actor>(devices[d.id]);
  }
  auto ctl = sys.spawn(fabric_controller, model, drivers, store_handle,
                       fabric_controller_config{}, fabric_restored{});
  run();
  // An all-reduce among both PoDs' ranks at a stage boundary: a plan on the Agg of both PoDs
  // and on the core.
  fabric_intent intent{"job", fabric_stage::train_grad_sync, {{primitive::all_reduce, 1.0}}, {},
                       4e9, 0};
  for (uint32_t s = 0; s < model.servers.size(); ++s)
    for (int g = 0; g < model.servers[s].gpus; ++g)
      intent.members.push_back({s, g});
  self->send(ctl, intent_atom::value, intent, commit_window{window_kind::stage_boundary, 1.0});
  expect((intent_atom, fabric_intent, commit_window), from(self).to(ctl).with(intent_atom::value, _, _));
  // Every touched device gets its diff; each confirms after its switching latency.
  std::vector<emulated_ocs_actor> touched;
  // CAF's allow() expands to a lambda, and clang 14 cannot capture a structured binding.
  for (auto& device : devices) {
    auto& dev = device.second;
    if (allow((apply_atom, xc_diff), from(ctl).to(dev).with(apply_atom::value, _)))
      touched.push_back(dev);
  }
  CAF_REQUIRE_EQUAL(touched.size(), devices.size());
  // 25 ms of switching, well inside the controller's apply timeout.
  CAF_CHECK_EQUAL(advance_time(std::chrono::milliseconds{25}), touched.size());
  for (auto& dev : touched) {
    expect((commit_atom, uint64_t), from(dev).to(dev).with(commit_atom::value, _));
    expect((apply_report), from(dev).to(ctl).with(_));
  }
  // Only once every device took its diff are the plans written, and only then answered.
  expect((write_atom, write_batch), from(ctl).to(store_handle).with(write_atom::value, _));
  expect((drain_atom), from(store_handle).to(store_handle).with(drain_atom::value));
  expect((uint64_t), from(store_handle).to(ctl).with(_));
  fabric_decision d;
  self->receive([&](const fabric_decision& x) { d = x; });
  CAF_CHECK(d.outcome == fabric_outcome::committed);
  CAF_CHECK_EQUAL(d.version, 1u);
  CAF_CHECK(d.circuits > 0);
  for (auto& [id, dev] : devices)
    caf::anon_send_exit(dev, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(ctl, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
