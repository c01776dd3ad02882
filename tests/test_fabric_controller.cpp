#define BOOST_TEST_MODULE fabric_controller
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <algorithm>
#include <set>

#include "config/config.hpp"
#include "drivers/ocs_driver.hpp"
#include "fabric/fabric_controller.hpp"
#include "fabric/shape.hpp"
#include "loom.pb.h"
#include "metrics/metrics.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "replay/driver.hpp"
#include "replay/request.hpp"
#include "store/database.hpp"
#include "store/store_actor.hpp"
#include "support/fabric_fixtures.hpp"
#include "support/process.hpp"

using namespace loom;
using namespace std::chrono_literals;

namespace {

template <class T, class Handle, class... Ts>
replay::answer<T> ask(replay::driver& drv, const Handle& h, Ts... xs) {
  return replay::request_now<T>(drv, h, xs...);
}

/// With health polls on the controller never falls quiet: each request gets a second more.
template <class T, class Handle, class... Ts>
replay::answer<T> ask_polled(replay::driver& drv, caf::timespan& now, const Handle& h, Ts... xs) {
  now += 1s;
  return replay::request_until<T>(drv, now, h, xs...);
}

/// A controller over a shaped fabric with an emulated OCS per device and a RocksDB store.
struct bench_fabric {
  test::temp_dir dir;
  replay::driver drv;
  fabric_model model;
  std::map<std::string, emulated_ocs_actor> ocs;
  store_actor store;
  fabric_controller_actor ctl;

  fabric_controller_config config;
  caf::timespan link_up{0};

  explicit bench_fabric(fabric_model m, std::vector<stored_record> restored = {},
                        fabric_controller_config cfg = {}, caf::timespan link_up_delay = {})
      : model(std::move(m)), config(std::move(cfg)), link_up(link_up_delay) {
    auto db = database::open(dir / "store");
    BOOST_REQUIRE(db);
    store = drv.system().spawn(loom::store, std::shared_ptr<database>{std::move(*db)},
                               std::make_shared<service_metrics>());
    spawn_controller(std::move(restored));
  }

  void spawn_controller(std::vector<stored_record> restored) {
    std::map<std::string, ocs_driver_actor> drivers;
    for (auto& d : model.devices) {
      if (!ocs.count(d.id)) {
        emulated_ocs_config c;
        c.device = d.id;
        c.size = {d.ports, d.ports};
        c.latency = {25, 25}; // constant: OrchestrRL §7.2's 25 ms
        c.command_timeout = 1s;
        c.link_up_delay = link_up;
        ocs[d.id] = drv.system().spawn(emulated_ocs, c);
      }
      drivers[d.id] = caf::actor_cast<ocs_driver_actor>(ocs[d.id]);
    }
    ctl = drv.system().spawn(fabric_controller, model, drivers, store, config,
                             fabric_restored{std::move(restored), {}});
    if (config.health_poll.count() > 0)
      drv.run_until(config.health_poll / 2); // the first poll, and nothing more
    else
      drv.run_to_quiescence();
  }

  std::vector<cross_connect> on_device(const std::string& id) {
    return *ask<std::vector<cross_connect>>(drv, ocs.at(id), get_atom::value).value;
  }

  std::vector<stored_record> stored_plans() {
    return *ask<std::vector<stored_record>>(drv, store, scan_atom::value,
                                            record_kind::circuit_plans, std::string{})
              .value;
  }

  ~bench_fabric() {
    for (auto& [id, a] : ocs)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(ctl, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
  }
};

using test::two_pods;

/// An all-reduce over ranks; ToR 0 <-> ToR 1 of PoD 0 for {0:0, 1:1}.
fabric_intent all_reduce(std::string owner, fabric_stage stage, std::vector<rank_ref> ranks,
                         double gb = 1) {
  return {std::move(owner), stage, {{primitive::all_reduce, 1.0}}, std::move(ranks), gb * 1e9};
}

const commit_window stage_boundary{window_kind::stage_boundary, 0.2};

} // namespace

BOOST_AUTO_TEST_CASE(commits_in_a_safe_window_and_persists_before_answering) {
  bench_fabric f{two_pods(4)};
  auto d = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                                all_reduce("job-a", fabric_stage::train_compute,
                                           {{0, 0}, {1, 1}}),
                                stage_boundary);
  BOOST_REQUIRE(d.value);
  BOOST_CHECK_EQUAL(d.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_EQUAL(d.value->version, 1u);
  BOOST_CHECK_EQUAL(d.value->circuits, 4u); // all four uplinks of ToR 0 and ToR 1
  // Answered only after the OCS applied the change (25 ms) and the store took the write.
  BOOST_CHECK(d.after >= 25ms);
  auto xcs = f.on_device("agg0");
  BOOST_CHECK_EQUAL(xcs.size(), 8u);
  auto records = f.stored_plans();
  BOOST_REQUIRE_EQUAL(records.size(), 1u);
  v1::CircuitPlan rec;
  BOOST_REQUIRE(rec.ParseFromString(records[0].value));
  BOOST_CHECK_EQUAL(rec.device(), "agg0");
  BOOST_CHECK_EQUAL(rec.circuits_size(), 4);
  BOOST_CHECK_EQUAL(rec.circuits(0).owner(), "job-a");
  BOOST_CHECK_EQUAL(rec.cross_connects_size(), 8);
  // The same intent again changes nothing.
  auto again = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                                    all_reduce("job-a", fabric_stage::train_compute,
                                               {{0, 0}, {1, 1}}),
                                    stage_boundary);
  BOOST_CHECK_EQUAL(again.value->outcome, fabric_outcome::unchanged);
  BOOST_CHECK_EQUAL(again.value->reason, "the intent's circuits are those already committed");
}

BOOST_AUTO_TEST_CASE(granularity_and_window_length_decide_when_a_plan_commits) {
  bench_fabric f{two_pods(4)};
  auto gen = all_reduce("gen-0", fabric_stage::gen, {{0, 0}, {1, 1}});
  // Gen reconfigures only at deployment boundaries.
  auto in_step = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value, gen, stage_boundary);
  BOOST_CHECK_EQUAL(in_step.value->outcome, fabric_outcome::deferred);
  BOOST_CHECK(f.on_device("agg0").empty());
  // A deployment boundary too short for 25 ms plus the 5 ms margin: still deferred.
  auto tight = ask<fabric_decision>(f.drv, f.ctl, window_atom::value, std::string{"gen-0"},
                                    commit_window{window_kind::deployment_boundary, 0.02});
  BOOST_CHECK_EQUAL(tight.value->outcome, fabric_outcome::deferred);
  BOOST_CHECK_NE(tight.value->reason.find("window 20.0 ms"), std::string::npos);
  auto wide = ask<fabric_decision>(f.drv, f.ctl, window_atom::value, std::string{"gen-0"},
                                   commit_window{window_kind::deployment_boundary, 2.0});
  BOOST_CHECK_EQUAL(wide.value->outcome, fabric_outcome::committed);
  auto plans = ask<fabric_listing>(f.drv, f.ctl, plans_atom::value);
  BOOST_CHECK_EQUAL(plans.value->plans.size(), 1u);
}

BOOST_AUTO_TEST_CASE(weight_sync_commits_on_demand_and_reports_what_its_slack_misses) {
  bench_fabric f{two_pods(4)};
  auto sync = ask<fabric_decision>(
    f.drv, f.ctl, intent_atom::value,
    fabric_intent{"sync", fabric_stage::weight_sync, {{primitive::broadcast, 1.0}},
                  {{0, 0}, {2, 1}, {3, 0}}, 1e9},
    commit_window{window_kind::before_broadcast, 0.01});
  BOOST_CHECK_EQUAL(sync.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_CLOSE(sync.value->exposed_s, 0.015, 1e-6);
  BOOST_CHECK(!f.on_device("core0").empty()); // the forest crosses the core
}

BOOST_AUTO_TEST_CASE(a_plan_failing_core_agg_coupling_keeps_the_previous_one) {
  // PoD p0 cannot lift to the core (test::split_agg_pods): the job's intra-PoD plan commits,
  // its next period's inter-PoD plan does not validate and the first plan stays.
  bench_fabric f{test::split_agg_pods()};
  // Rail 0 of server b to rail 1 of server c: ToR b0 <-> b1.
  auto intra = all_reduce("job-a", fabric_stage::train_compute, {{1, 0}, {2, 1}});
  auto committed = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value, intra, stage_boundary);
  BOOST_REQUIRE_EQUAL(committed.value->outcome, fabric_outcome::committed);
  auto before = f.on_device("agg-c");
  BOOST_CHECK(!before.empty());
  auto wide = all_reduce("job-a", fabric_stage::train_grad_sync, {{0, 0}, {1, 0}}, 8);
  auto second = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value, wide, stage_boundary);
  BOOST_REQUIRE(second.value);
  BOOST_CHECK_EQUAL(second.value->outcome, fabric_outcome::kept);
  BOOST_CHECK_NE(second.value->reason.find("Core-Agg coupling"), std::string::npos);
  BOOST_CHECK_EQUAL(second.value->version, committed.value->version);
  BOOST_CHECK(f.on_device("agg-c") == before);
  BOOST_CHECK(f.on_device("core").empty());
}

BOOST_AUTO_TEST_CASE(a_failed_port_is_masked_and_only_its_circuit_moves) {
  bench_fabric f{two_pods(4)};
  auto intent = all_reduce("job-a", fabric_stage::train_compute, {{0, 0}, {1, 1}});
  ask<fabric_decision>(f.drv, f.ctl, intent_atom::value, intent, stage_boundary);
  auto before = f.on_device("agg0");
  auto& failed = f.model.tors[0].uplinks[1];
  auto owners = ask<std::vector<std::string>>(f.drv, f.ctl, mask_atom::value,
                                              std::string{"agg0"}, failed.port);
  BOOST_REQUIRE(owners.value);
  BOOST_CHECK(*owners.value == std::vector<std::string>{"job-a"});
  auto moved = ask<fabric_decision>(f.drv, f.ctl, window_atom::value, std::string{"job-a"},
                                    stage_boundary);
  BOOST_CHECK_EQUAL(moved.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_EQUAL(moved.value->circuits, 3u);
  BOOST_CHECK_EQUAL(moved.value->changed, 2u); // one circuit: two cross-connects removed
  auto after = f.on_device("agg0");
  for (auto& x : after)
    BOOST_CHECK(x.in != failed.port && x.out != failed.port + f.model.devices[0].ports);
  BOOST_CHECK_EQUAL(after.size(), before.size() - 2);
}

BOOST_AUTO_TEST_CASE(the_owner_hears_of_a_commit_once_its_links_are_up) {
  // mFabric §6: NICs take a while to bring a new circuit's link up after the switch settled.
  bench_fabric f{two_pods(4), {}, {}, 40ms};
  auto d = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                                all_reduce("job-a", fabric_stage::train_compute,
                                           {{0, 0}, {1, 1}}),
                                stage_boundary);
  BOOST_REQUIRE(d.value);
  BOOST_CHECK_EQUAL(d.value->outcome, fabric_outcome::committed);
  BOOST_CHECK(d.after >= 25ms + 40ms);
  bench_fabric now{two_pods(4)};
  auto at_once = ask<fabric_decision>(now.drv, now.ctl, intent_atom::value,
                                      all_reduce("job-a", fabric_stage::train_compute,
                                                 {{0, 0}, {1, 1}}),
                                      stage_boundary);
  BOOST_CHECK(at_once.after < 25ms + 40ms);
}

BOOST_AUTO_TEST_CASE(a_polled_alarm_masks_the_port_and_its_owner_replans_at_its_next_window) {
  fabric_controller_config cfg;
  cfg.health_poll = 100ms;
  bench_fabric f{two_pods(4), {}, cfg};
  caf::timespan now = cfg.health_poll / 2;
  auto intent = all_reduce("job-a", fabric_stage::train_compute, {{0, 0}, {1, 1}});
  auto first = ask_polled<fabric_decision>(f.drv, now, f.ctl, intent_atom::value, intent,
                                           stage_boundary);
  BOOST_CHECK_EQUAL(first.value->outcome, fabric_outcome::committed);
  // The switch raises an alarm on a port the plan uses; the next poll finds it.
  auto failed = f.model.tors[0].uplinks[1].port;
  ask_polled<ok_atom>(f.drv, now, f.ocs.at("agg0"), fault_atom::value, ocs_fault{{failed}});
  auto moved = ask_polled<fabric_decision>(f.drv, now, f.ctl, window_atom::value,
                                           std::string{"job-a"}, stage_boundary);
  BOOST_CHECK_EQUAL(moved.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_EQUAL(moved.value->circuits, 3u);
  // Held by name: a range-for over a member of a temporary outlives it (ASan found it).
  auto table = ask_polled<std::vector<cross_connect>>(f.drv, now, f.ocs.at("agg0"),
                                                      get_atom::value);
  for (auto& x : *table.value)
    BOOST_CHECK(x.in != failed && x.out != failed + f.model.devices[0].ports);
}

BOOST_AUTO_TEST_CASE(a_restarted_controller_repairs_a_switch_that_lost_its_circuits) {
  // A restart finds the switches as they are (here: emulations started empty); polling reads
  // each back and makes only what the stored plans have and the switch lacks.
  std::vector<stored_record> stored;
  {
    bench_fabric f{two_pods(4)};
    ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                         all_reduce("job-a", fabric_stage::train_compute, {{0, 0}, {1, 1}}),
                         stage_boundary);
    stored = f.stored_plans();
  }
  fabric_controller_config cfg;
  cfg.health_poll = 100ms;
  bench_fabric again{two_pods(4), stored, cfg};
  caf::timespan now = cfg.health_poll / 2;
  auto on = ask_polled<std::vector<cross_connect>>(again.drv, now, again.ocs.at("agg0"),
                                                   get_atom::value);
  BOOST_CHECK_EQUAL(on.value->size(), 8u);
  auto d = ask_polled<fabric_decision>(again.drv, now, again.ctl, intent_atom::value,
                                       all_reduce("job-a", fabric_stage::train_compute,
                                                  {{0, 0}, {1, 1}}),
                                       stage_boundary);
  BOOST_CHECK_EQUAL(d.value->outcome, fabric_outcome::unchanged);
}

BOOST_AUTO_TEST_CASE(a_restarted_controller_resumes_its_committed_plans_from_the_store) {
  bench_fabric f{two_pods(4)};
  ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                       all_reduce("job-a", fabric_stage::train_compute, {{0, 0}, {1, 1}}),
                       stage_boundary);
  caf::anon_send_exit(f.ctl, caf::exit_reason::user_shutdown);
  f.drv.run_to_quiescence();
  f.spawn_controller(f.stored_plans());
  auto plans = ask<fabric_listing>(f.drv, f.ctl, plans_atom::value);
  BOOST_REQUIRE_EQUAL(plans.value->plans.size(), 1u);
  BOOST_CHECK_EQUAL(plans.value->plans[0].owner, "job-a");
  BOOST_CHECK_EQUAL(plans.value->plans[0].circuits, 4u);
  BOOST_CHECK_EQUAL(plans.value->plans[0].version, 1u);
  // Its ports are still held: another owner cannot take them.
  auto other = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                                    all_reduce("job-b", fabric_stage::train_compute,
                                               {{0, 0}, {1, 1}}),
                                    stage_boundary);
  BOOST_CHECK_EQUAL(other.value->outcome, fabric_outcome::kept);
  // A malformed intent is refused with the reason.
  auto bad = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value,
                                  all_reduce("job-c", fabric_stage::gen, {{99, 0}}),
                                  stage_boundary);
  BOOST_CHECK(bad.error);
  BOOST_CHECK_NE(render(bad.error).find("server 99"), std::string::npos);
}

namespace {

/// Opus Fig. 8's job (PP = 3, DP = 2, CP = 2) on one 12-port photonic rail, a server wired to
/// each port.
fabric_model one_rail(int ports = 12) {
  fabric_config t;
  t.kind = fabric_kind::opus;
  t.link_gbps = 200;
  t.nics_per_server = 1;
  t.pods = {{"p0", {}}};
  for (int s = 0; s < ports; ++s)
    t.pods[0].servers.push_back(fmt::format("s{}", s));
  ocs_device rail;
  rail.id = "rail0";
  rail.tier = ocs_tier::rail;
  rail.rail = 0;
  rail.ports = ports;
  t.ocs = {rail};
  return *fabric_model::build(t, {}).value;
}

std::set<cross_connect> mapping(const topo_id& id) {
  opus_layout fig8{3, {2, 2}};
  std::set<cross_connect> out;
  for (int s = 0; s < 3; ++s)
    for (auto& x : submapping(fig8, id, s))
      out.insert(x);
  return out;
}

} // namespace

// Opus §7: two jobs share a 24-port rail on ports 1-12 and 13-24; a third finds none. An end
// asked while the first job's transition is on its way waits for it (its writers are answered),
// then clears only that job's ports, which the third job then gets.
BOOST_AUTO_TEST_CASE(opus_jobs_share_a_rail_and_an_ended_job_frees_its_ports_after_its_transition) {
  bench_fabric f{one_rail(24)};
  opus_job a{"a", 3, {2, 2}, {"rail0"}, "111"};
  auto b = a, c = a;
  b.job = "b";
  c.job = "c";
  auto ra = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, a);
  auto rb = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, b);
  BOOST_REQUIRE(ra.value && rb.value);
  BOOST_CHECK_EQUAL(ra.value->first_port, 1u);
  BOOST_CHECK_EQUAL(rb.value->first_port, 13u);
  BOOST_REQUIRE_EQUAL(rb.value->servers.size(), 12u);
  BOOST_CHECK_EQUAL(rb.value->servers[0], "s12"); // the server wired to port 13
  auto refused = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, c);
  BOOST_CHECK(code_of(refused.error) == errc::unavailable);
  const auto b_before = f.on_device("rail0").size() / 2;
  replay::answer<topo_ack> w0, w1;
  replay::answer<ok_atom> ended;
  replay::send_request(f.drv, w0, f.ctl, topo_write_atom::value, std::string{"a"},
                       topo_write{"pp0-1", 7, 2, 0, 0});
  replay::send_request(f.drv, w1, f.ctl, topo_write_atom::value, std::string{"a"},
                       topo_write{"pp0-1", 7, 2, 1, 0});
  replay::send_request(f.drv, ended, f.ctl, opus_atom::value, cancel_atom::value,
                       std::string{"a"});
  f.drv.run_to_quiescence();
  BOOST_REQUIRE(w0.value && w1.value);
  BOOST_CHECK_EQUAL(w0.value->topo, "001");
  BOOST_REQUIRE(ended.value);
  auto left = f.on_device("rail0");
  BOOST_CHECK_EQUAL(left.size(), b_before);
  for (auto& x : left)
    BOOST_CHECK(x.in >= 13 && x.out >= 24 + 13); // b's alone
  auto again = ask<ok_atom>(f.drv, f.ctl, opus_atom::value, cancel_atom::value, std::string{"a"});
  BOOST_CHECK(code_of(again.error) == errc::not_found);
  auto rc = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, c);
  BOOST_REQUIRE(rc.value);
  BOOST_CHECK_EQUAL(rc.value->first_port, 1u);
}

BOOST_AUTO_TEST_CASE(opus_topo_write_barrier_acks_after_the_rail_confirms) {
  bench_fabric f{one_rail()};
  opus_job job{"llm", 3, {2, 2}, {"rail0"}, "111"};
  auto registered = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, job);
  BOOST_REQUIRE(registered.value);
  BOOST_CHECK_EQUAL(registered.value->topo, "111");
  BOOST_CHECK(registered.value->phases.empty()); // nothing profiled yet
  auto xs = f.on_device("rail0");
  BOOST_CHECK(std::set<cross_connect>(xs.begin(), xs.end()) == mapping(topo_id::parse("111")));
  // Stages 0 and 1 start PP Send/Recv: the barrier waits for both writers.
  replay::answer<topo_ack> first, second;
  f.drv.system().spawn([&](caf::event_based_actor* self) {
    auto start = self->clock().now();
    self->request(f.ctl, caf::infinite, topo_write_atom::value, std::string{"llm"},
                  topo_write{"pp0-1", 7, 2, 0, 0})
      .then([&, self, start](topo_ack a) {
        first.value = a;
        first.after = self->clock().now() - start;
      });
  });
  f.drv.run_to_quiescence();
  BOOST_CHECK(!first.value); // one of two writers: no ACK yet
  second = ask<topo_ack>(f.drv, f.ctl, topo_write_atom::value, std::string{"llm"},
                         topo_write{"pp0-1", 7, 2, 1, 0});
  BOOST_REQUIRE(first.value);
  BOOST_REQUIRE(second.value);
  BOOST_CHECK_EQUAL(second.value->topo, "001");
  BOOST_CHECK(second.after >= 25ms); // after the rail applied it
  xs = f.on_device("rail0");
  BOOST_CHECK(std::set<cross_connect>(xs.begin(), xs.end()) == mapping(topo_id::parse("001")));
  // O1: a write that changes no digit is acknowledged without touching the rail.
  auto same = ask<topo_ack>(f.drv, f.ctl, topo_write_atom::value, std::string{"llm"},
                            topo_write{"dp2", 3, 1, 2, 1});
  BOOST_CHECK_EQUAL(same.value->topo, "001");
  BOOST_CHECK(same.after == caf::timespan{0});
}

BOOST_AUTO_TEST_CASE(opus_learns_the_phase_table_from_the_profiled_traces) {
  bench_fabric f{one_rail()};
  opus_job job{"llm", 2, {2}, {"rail0"}, "11"};
  BOOST_REQUIRE(ask<opus_registration>(f.drv, f.ctl, opus_atom::value, job).value);
  // Opus §4.2: after profiling the shims send what each stage ran in one step.
  job.traces = {{0, {1, 0, 0, 1, 1}}, {1, {0, 1, 1, 0, 1}}};
  auto learned = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, job);
  BOOST_REQUIRE(learned.value);
  std::vector<std::tuple<int, int, uint32_t, uint32_t>> phases;
  for (auto& p : learned.value->phases)
    phases.emplace_back(p.stage, p.digit, p.first, p.last);
  BOOST_CHECK((phases == std::vector<std::tuple<int, int, uint32_t, uint32_t>>{
                 {0, 1, 0, 0}, {0, 0, 1, 2}, {0, 1, 3, 4},
                 {1, 0, 0, 0}, {1, 1, 1, 2}, {1, 0, 3, 3}, {1, 1, 4, 4}}));
  // A trace that names a digit the layout does not have, or a stage it lacks, says why.
  job.traces = {{0, {1, 2}}};
  auto bad = ask<opus_registration>(f.drv, f.ctl, opus_atom::value, job);
  BOOST_CHECK(!bad.value);
  job.traces = {{5, {1}}};
  BOOST_CHECK(!ask<opus_registration>(f.drv, f.ctl, opus_atom::value, job).value);
}

BOOST_AUTO_TEST_CASE(opus_falls_back_to_a_giant_ring_when_the_rail_keeps_timing_out) {
  bench_fabric f{one_rail()};
  BOOST_REQUIRE(ask<opus_registration>(f.drv, f.ctl, opus_atom::value,
                                       opus_job{"llm", 3, {2, 2}, {"rail0"}, "111"})
                  .value);
  ocs_fault fault;
  fault.timeout_next = 3; // the first try and both retries
  BOOST_REQUIRE(ask<ok_atom>(f.drv, f.ocs.at("rail0"), fault_atom::value, fault).value);
  auto ack = ask<topo_ack>(f.drv, f.ctl, topo_write_atom::value, std::string{"llm"},
                           topo_write{"dp1", 0, 1, 1, 2});
  BOOST_REQUIRE(ack.value);
  BOOST_CHECK(ack.value->fallback);
  auto xs = f.on_device("rail0");
  BOOST_REQUIRE_EQUAL(xs.size(), 12u);
  for (auto& x : xs)
    BOOST_CHECK_EQUAL(x.out - 12, x.in % 12 + 1); // rank r -> r + 1
}

namespace {

fabric_model from_config(const std::string& file) {
  auto cfg = load_config_file(test::source_path(file));
  BOOST_REQUIRE(cfg.value);
  std::vector<node> nodes = cfg.value->cluster.rollout;
  nodes.insert(nodes.end(), cfg.value->cluster.training.begin(),
               cfg.value->cluster.training.end());
  auto m = fabric_model::build(cfg.value->fabric, nodes).value;
  BOOST_REQUIRE(m);
  return std::move(*m);
}

} // namespace

BOOST_AUTO_TEST_CASE(mfabric_region_from_config_gets_numa_balanced_circuits) {
  bench_fabric f{from_config("conf/mfabric-region.toml")};
  // EP all-to-all among three servers of the region: 12 OCS NICs, two circuits per pair.
  fabric_intent ep{"moe", fabric_stage::train_compute, {{primitive::all_to_all, 1.0}}, {}, 4e9};
  for (uint32_t s = 0; s < 3; ++s)
    for (int g = 0; g < 8; ++g)
      ep.members.push_back({s, g});
  auto d = ask<fabric_decision>(f.drv, f.ctl, intent_atom::value, ep, stage_boundary);
  BOOST_REQUIRE(d.value);
  BOOST_CHECK_EQUAL(d.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_EQUAL(d.value->circuits, 6u);
  auto xcs = f.on_device("region-ocs");
  BOOST_CHECK_EQUAL(xcs.size(), 12u);
  // Port 4i+k+1 is server i's NIC {2, 3, 6, 7}[k]: k < 2 on NUMA node 0, else node 1. Each
  // pair's two circuits leave every server from both NUMA nodes.
  std::map<std::pair<uint32_t, uint32_t>, std::set<std::pair<uint32_t, uint32_t>>> ends;
  for (auto& x : xcs) {
    uint32_t a = x.in - 1;
    uint32_t b = x.out - 32 - 1;
    std::pair key{std::min(a / 4, b / 4), std::max(a / 4, b / 4)};
    ends[key].insert({a / 4, (a % 4) / 2});
    ends[key].insert({b / 4, (b % 4) / 2});
  }
  BOOST_CHECK_EQUAL(ends.size(), 3u);
  for (auto& [pair, e] : ends)
    BOOST_CHECK_EQUAL(e.size(), 4u);
}

BOOST_AUTO_TEST_CASE(a_failed_server_leaves_the_plans_and_comes_back_with_its_server) {
  bench_fabric f{from_config("conf/mfabric-region.toml")};
  fabric_intent ep{"moe", fabric_stage::train_compute, {{primitive::all_to_all, 1.0}}, {}, 4e9};
  for (uint32_t s = 0; s < 3; ++s)
    for (int g = 0; g < 8; ++g)
      ep.members.push_back({s, g});
  ask<fabric_decision>(f.drv, f.ctl, intent_atom::value, ep, stage_boundary);
  // Server 2's regional NICs are ports 9-12 (duplex), outputs 41-44.
  auto on_server_2 = [&] {
    auto xcs = f.on_device("region-ocs");
    return std::count_if(xcs.begin(), xcs.end(), [](const cross_connect& x) {
      return (x.in >= 9 && x.in <= 12) || (x.out >= 32 + 9 && x.out <= 32 + 12);
    });
  };
  BOOST_REQUIRE_GT(on_server_2(), 0);
  const auto& server = f.model.servers[2].id;
  // RFabric §5.4 (i): the owner re-plans at its next window, without the dead server.
  auto owners = ask<std::vector<std::string>>(f.drv, f.ctl, node_atom::value, server, true);
  BOOST_CHECK(*owners.value == std::vector<std::string>{"moe"});
  auto without = ask<fabric_decision>(f.drv, f.ctl, window_atom::value, std::string{"moe"},
                                      stage_boundary);
  BOOST_CHECK_EQUAL(without.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_EQUAL(without.value->circuits, 4u); // servers 0 and 1: every NIC on the other
  BOOST_CHECK_EQUAL(on_server_2(), 0);
  // A server outside the fabric changes nothing; a recovered one is planned for again.
  auto none = ask<std::vector<std::string>>(f.drv, f.ctl, node_atom::value,
                                            std::string{"no-such-node"}, true);
  BOOST_CHECK(none.value->empty());
  owners = ask<std::vector<std::string>>(f.drv, f.ctl, node_atom::value, server, false);
  BOOST_CHECK(*owners.value == std::vector<std::string>{"moe"});
  auto back = ask<fabric_decision>(f.drv, f.ctl, window_atom::value, std::string{"moe"},
                                   stage_boundary);
  BOOST_CHECK_EQUAL(back.value->outcome, fabric_outcome::committed);
  BOOST_CHECK_EQUAL(back.value->circuits, 6u);
  BOOST_CHECK_GT(on_server_2(), 0);
}

BOOST_AUTO_TEST_CASE(a_predicted_intent_is_weighed_by_the_monitors_forecast_of_its_layer) {
  // mFabric §5.1, App. B: the shims report each MoE layer's dispatch; a layer's first
  // all-to-all, announced before its gating, is planned from the forecast. Eight servers of
  // the region, four regional NICs each: not every pair gets a circuit.
  auto intent = [] {
    fabric_intent ep{"moe", fabric_stage::train_compute, {{primitive::all_to_all, 1.0}}, {},
                     4e9};
    for (uint32_t s = 0; s < 8; ++s)
      for (int g = 0; g < 8; ++g)
        ep.members.push_back({s, g});
    return ep;
  };
  const size_t n = 64;
  // Layer 0 spreads evenly; layer 1's load falls off by server, 1 / (s + 1)^2, as a skewed
  // gating's does: a plan for it beats the volume-blind split (a load on only two servers
  // would not: their own NICs bound it either way, and the blind split would be kept).
  std::vector<double> even(n, 100.0), hot(n, 1.0);
  for (size_t r = 0; r < n; ++r)
    hot[r] = 1000.0 / double((r / 8 + 1) * (r / 8 + 1));
  auto layout_of_moe = [](bench_fabric& f) {
    return ask<circuit_layout>(f.drv, f.ctl, get_atom::value, std::string{"moe"}).value->agg;
  };
  bench_fabric live{from_config("conf/mfabric-region.toml")};
  for (uint64_t it = 0; it < 4; ++it) {
    ask<ok_atom>(live.drv, live.ctl, expert_atom::value, expert_load{"moe", it, 0, even});
    ask<ok_atom>(live.drv, live.ctl, expert_atom::value, expert_load{"moe", it, 1, hot});
  }
  ask<ok_atom>(live.drv, live.ctl, expert_atom::value, expert_load{"moe", 4, 0, even});
  auto predicted = intent();
  predicted.predicted = true;
  predicted.iteration = 4;
  predicted.layer = 1;
  auto d = ask<fabric_decision>(live.drv, live.ctl, intent_atom::value, predicted, stage_boundary);
  BOOST_REQUIRE(d.value);
  BOOST_CHECK_EQUAL(d.value->outcome, fabric_outcome::committed);
  // The plan is the one the true load of layer 1 asks for, and not the uniform one.
  bench_fabric known{from_config("conf/mfabric-region.toml")}, blind{from_config("conf/mfabric-region.toml")};
  auto explicit_weights = intent();
  explicit_weights.receive_weights = hot;
  ask<fabric_decision>(known.drv, known.ctl, intent_atom::value, explicit_weights, stage_boundary);
  ask<fabric_decision>(blind.drv, blind.ctl, intent_atom::value, intent(), stage_boundary);
  auto planned = layout_of_moe(live);
  BOOST_CHECK(planned == layout_of_moe(known));
  BOOST_CHECK(planned != layout_of_moe(blind));
  // Without history, the layer's plan falls back on the previous layer's load (here even).
  bench_fabric fresh{from_config("conf/mfabric-region.toml")};
  ask<ok_atom>(fresh.drv, fresh.ctl, expert_atom::value, expert_load{"moe", 0, 0, even});
  predicted.iteration = 0;
  ask<fabric_decision>(fresh.drv, fresh.ctl, intent_atom::value, predicted, stage_boundary);
  BOOST_CHECK(layout_of_moe(fresh) == layout_of_moe(blind));
}

BOOST_AUTO_TEST_CASE(opus_rails_from_config_are_programmed_per_rail) {
  bench_fabric f{from_config("conf/opus-rails.toml")};
  // PP = 2 stages of DP = 2 on each of the four rails.
  opus_job job{"llama", 2, {2}, {"rail0", "rail1", "rail2", "rail3"}, "11"};
  BOOST_REQUIRE(ask<opus_registration>(f.drv, f.ctl, opus_atom::value, job).value);
  ask<topo_ack>(f.drv, f.ctl, topo_write_atom::value, std::string{"llama"},
                topo_write{"pp0-1", 0, 2, 0, 0});
  auto ack = ask<topo_ack>(f.drv, f.ctl, topo_write_atom::value, std::string{"llama"},
                           topo_write{"pp0-1", 0, 2, 1, 0});
  BOOST_REQUIRE(ack.value);
  BOOST_CHECK_EQUAL(ack.value->topo, "00");
  opus_layout layout{2, {2}};
  std::set<cross_connect> want;
  for (int s = 0; s < 2; ++s)
    for (auto& x : submapping(layout, topo_id::parse("00"), s))
      want.insert(x);
  for (auto rail : {"rail0", "rail1", "rail2", "rail3"}) {
    auto xs = f.on_device(rail);
    BOOST_CHECK(std::set<cross_connect>(xs.begin(), xs.end()) == want);
  }
}
