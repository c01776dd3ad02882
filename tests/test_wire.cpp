#define BOOST_TEST_MODULE wire
#include <boost/test/unit_test.hpp>

#include <thread>

#include <zmq.hpp>

#include "gateway/grant_matcher.hpp"
#include "gateway/keys.hpp"
#include "gateway/rate_limiter.hpp"
#include "gateway/sessions.hpp"
#include "gateway/wire.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"
#include "protocol/error.hpp"

using namespace loom;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(run_permits)

BOOST_AUTO_TEST_CASE(an_acquire_waits_for_the_permit_and_a_permit_for_the_acquire) {
  grant_matcher m;
  auto t0 = std::chrono::steady_clock::time_point{};
  // The worker asks first: it waits, and the permit answers it (and only it).
  BOOST_CHECK(!m.acquire("A", phase_kind::rollout, {"w1", 7, t0}));
  BOOST_CHECK_EQUAL(m.waiting(), 1u);
  BOOST_CHECK(m.waiting("A", phase_kind::rollout, "w1", 7));
  BOOST_CHECK(m.grant({"A", phase_kind::training, 8, 0, false}).empty()); // another phase
  auto answered = m.grant({"A", phase_kind::rollout, 8, 1.5, true});
  BOOST_REQUIRE_EQUAL(answered.size(), 1u);
  BOOST_CHECK_EQUAL(answered[0].identity, "w1");
  BOOST_CHECK_EQUAL(answered[0].request_id, 7u);
  BOOST_CHECK(!m.waiting("A", phase_kind::rollout, "w1", 7));
  // The training permit came first: it holds for every worker of the job until released.
  auto kept = m.acquire("A", phase_kind::training, {"w1", 8, t0});
  BOOST_REQUIRE(kept);
  BOOST_CHECK_EQUAL(kept->gpus, 8);
  BOOST_CHECK(m.acquire("A", phase_kind::training, {"w2", 1, t0}));
  m.release("A", phase_kind::training);
  BOOST_CHECK(!m.acquire("A", phase_kind::training, {"w1", 9, t0})); // the next one waits
  BOOST_CHECK_EQUAL(m.kept(), 1u); // the rollout's, until its release
}

BOOST_AUTO_TEST_CASE(a_job_that_leaves_takes_its_waiters_and_permits_along) {
  grant_matcher m;
  auto t0 = std::chrono::steady_clock::time_point{};
  m.acquire("A", phase_kind::rollout, {"w1", 1, t0});
  m.acquire("A", phase_kind::sync, {"w2", 2, t0});
  m.acquire("B", phase_kind::rollout, {"w3", 3, t0});
  m.grant({"A", phase_kind::training, 8, 0, false});
  BOOST_CHECK(m.waiting("A"));
  auto dropped = m.drop("A");
  BOOST_CHECK_EQUAL(dropped.size(), 2u);
  BOOST_CHECK(!m.waiting("A"));
  BOOST_CHECK_EQUAL(m.waiting(), 1u); // B's
  BOOST_CHECK_EQUAL(m.kept(), 0u);
  BOOST_CHECK_EQUAL(m.grant({"B", phase_kind::rollout, 8, 0, false}).size(), 1u);
}

BOOST_AUTO_TEST_CASE(a_job_placed_again_keeps_its_waiters_but_not_its_permits) {
  grant_matcher m;
  auto t0 = std::chrono::steady_clock::time_point{};
  m.grant({"A", phase_kind::rollout, 8, 0, false});
  m.acquire("A", phase_kind::training, {"w1", 1, t0});
  m.revoke("A");
  BOOST_CHECK_EQUAL(m.kept(), 0u);
  BOOST_CHECK(m.waiting("A", phase_kind::training, "w1", 1));
  auto waiters = m.waiters("A"); // for the new group to explain
  BOOST_REQUIRE_EQUAL(waiters.size(), 1u);
  BOOST_CHECK(waiters[0].first == phase_kind::training);
  BOOST_CHECK_EQUAL(waiters[0].second.identity, "w1");
  BOOST_CHECK(m.waiters("B").empty());
  // A waiting request can be taken out to be answered otherwise, once.
  BOOST_CHECK(m.withdraw("A", phase_kind::training, "w1", 1));
  BOOST_CHECK(!m.withdraw("A", phase_kind::training, "w1", 1));
  m.acquire("B", phase_kind::sync, {"w2", 2, t0});
  BOOST_CHECK_EQUAL(m.drop_all().size(), 1u);
  BOOST_CHECK_EQUAL(m.waiting(), 0u);
}

BOOST_AUTO_TEST_CASE(waiting_counts_follow_every_way_a_request_leaves) {
  grant_matcher m;
  auto t0 = std::chrono::steady_clock::time_point{};
  m.acquire("A", phase_kind::rollout, {"c1", 1, t0});
  m.acquire("A", phase_kind::rollout, {"c2", 2, t0});
  m.acquire("B", phase_kind::training, {"c1", 3, t0});
  m.acquire("C", phase_kind::sync, {"c1", 4, t0});
  m.acquire("D", phase_kind::sync, {"c3", 5, t0});
  BOOST_CHECK_EQUAL(m.waiting(), 5u);
  BOOST_CHECK_EQUAL(m.waiting_on("c1"), 3u);
  m.grant({"A", phase_kind::rollout, 8, 0, false}); // answers c1's and c2's
  BOOST_CHECK_EQUAL(m.waiting_on("c1"), 2u);
  BOOST_CHECK_EQUAL(m.waiting_on("c2"), 0u);
  BOOST_CHECK(m.withdraw("B", phase_kind::training, "c1", 3));
  BOOST_CHECK_EQUAL(m.drop("D").size(), 1u);
  BOOST_CHECK_EQUAL(m.waiting_on("c3"), 0u);
  BOOST_CHECK_EQUAL(m.drop_connection("c1"), 1u);
  BOOST_CHECK_EQUAL(m.waiting(), 0u);
  BOOST_CHECK(!m.waiting("C"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sessions)

session worker(std::string conn, std::chrono::steady_clock::time_point t, std::string key = "K1",
               std::string incarnation = "p1", worker_role role = worker_role::rollout) {
  return session{std::move(conn), role, "n0", "A", t, std::move(key), std::move(incarnation)};
}

BOOST_AUTO_TEST_CASE(a_worker_id_resumes_on_a_new_connection_and_silence_expires_it) {
  session_table t;
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  BOOST_CHECK(t.open("w1", worker("conn-1", t0), 6s) == open_outcome::opened);
  BOOST_CHECK(t.open("admin", {"conn-2", worker_role::admin, "", "", t0, "KA", "a"}, 6s)
              == open_outcome::opened);
  BOOST_REQUIRE(t.worker_of("conn-1"));
  // The same process on another connection (a restarted service, a reconnect) resumes.
  BOOST_CHECK(t.open("w1", worker("conn-3", t0), 6s) == open_outcome::resumed);
  BOOST_CHECK(!t.worker_of("conn-1"));
  BOOST_CHECK(t.identities_of("A") == std::vector<std::string>{"conn-3"});
  BOOST_CHECK(t.workers_of("A") == std::vector<std::string>{"w1 (rollout)"});
  BOOST_CHECK(t.touch("conn-3", t0 + 5s));
  BOOST_CHECK(!t.touch("conn-1", t0 + 5s));
  // Silent for more than the limit: expired, admin sessions never.
  BOOST_CHECK(t.expire(t0 + 10s, 6s).empty());
  auto dead = t.expire(t0 + 12s, 6s);
  BOOST_REQUIRE_EQUAL(dead.size(), 1u);
  BOOST_CHECK_EQUAL(dead[0].first, "w1");
  BOOST_CHECK_EQUAL(t.by_role()[worker_role::admin], 1u);
  BOOST_CHECK_EQUAL(t.by_role()[worker_role::rollout], 0u);
  t.close("conn-2");
  BOOST_CHECK(!t.worker_of("conn-2"));
}

BOOST_AUTO_TEST_CASE(a_worker_id_is_bound_to_its_key_role_and_live_process) {
  session_table t;
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  BOOST_REQUIRE(t.open("w1", worker("conn-1", t0), 6s) == open_outcome::opened);
  // Another key, or the same key in another role: never.
  BOOST_CHECK(t.open("w1", worker("conn-2", t0, "K2"), 6s) == open_outcome::forbidden);
  BOOST_CHECK(t.open("w1", worker("conn-2", t0, "K1", "p1", worker_role::train), 6s)
              == open_outcome::forbidden);
  // A second process with the same key while the first is alive: refused, the first keeps it.
  BOOST_CHECK(t.check("w1", worker("conn-2", t0 + 1s, "K1", "p2"), 6s) == open_outcome::conflict);
  BOOST_CHECK(t.open("w1", worker("conn-2", t0 + 1s, "K1", "p2"), 6s) == open_outcome::conflict);
  BOOST_CHECK(t.identities_of("A") == std::vector<std::string>{"conn-1"});
  // Once the first has gone silent past the limit, the second takes the id over.
  BOOST_CHECK(t.open("w1", worker("conn-2", t0 + 7s, "K1", "p2"), 6s) == open_outcome::resumed);
  BOOST_CHECK(t.identities_of("A") == std::vector<std::string>{"conn-2"});
}

BOOST_AUTO_TEST_CASE(sessions_are_counted_per_key_until_they_close_or_expire) {
  session_table t;
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  t.open("w1", worker("conn-1", t0), 6s);
  t.open("w2", worker("conn-2", t0), 6s);
  t.open("w3", worker("conn-3", t0, "K2"), 6s);
  BOOST_CHECK_EQUAL(t.sessions_of_key("K1"), 2u);
  t.open("w1", worker("conn-4", t0), 6s); // resumed: still one session
  BOOST_CHECK_EQUAL(t.sessions_of_key("K1"), 2u);
  t.open("w4", worker("conn-4", t0), 6s); // the connection registers as another worker
  BOOST_CHECK_EQUAL(t.sessions_of_key("K1"), 2u);
  t.close("conn-2");
  BOOST_CHECK_EQUAL(t.sessions_of_key("K1"), 1u);
  BOOST_CHECK_EQUAL(t.expire(t0 + 7s, 6s).size(), 2u);
  BOOST_CHECK_EQUAL(t.sessions_of_key("K1"), 0u);
  BOOST_CHECK_EQUAL(t.sessions_of_key("K2"), 0u);
}

BOOST_AUTO_TEST_CASE(roles_run_their_own_phases_and_only_shims_announce_fabric) {
  BOOST_CHECK(may_run(worker_role::driver, phase_kind::training));
  BOOST_CHECK(may_run(worker_role::rollout, phase_kind::rollout));
  BOOST_CHECK(!may_run(worker_role::rollout, phase_kind::training));
  BOOST_CHECK(!may_run(worker_role::train, phase_kind::rollout));
  BOOST_CHECK(may_run(worker_role::train, phase_kind::sync));
  BOOST_CHECK(!may_run(worker_role::ocs_agent, phase_kind::rollout));
  BOOST_CHECK(!runs_job(worker_role::collective_shim));
  BOOST_CHECK(announces_fabric(worker_role::collective_shim));
  BOOST_CHECK(!announces_fabric(worker_role::rollout));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(envelopes)

BOOST_AUTO_TEST_CASE(a_fabric_intent_is_read_by_enum_or_by_its_text) {
  v1::FabricIntent w;
  w.set_owner("job");
  w.set_stage_kind(v1::FABRIC_STAGE_GRAD_SYNC);
  w.set_primitive_kind(v1::PRIMITIVE_ALL_REDUCE);
  w.set_window_kind(v1::WINDOW_KIND_STAGE_BOUNDARY);
  w.set_bytes(1e9);
  w.set_window_s(0.5);
  auto* r = w.add_members();
  r->set_server(3);
  r->set_gpu(5);
  auto by_enum = wire::intent_of(w);
  BOOST_REQUIRE(by_enum);
  BOOST_CHECK_EQUAL(by_enum->first.stage, fabric_stage::train_grad_sync);
  BOOST_CHECK_EQUAL(by_enum->first.mix.front().kind, primitive::all_reduce);
  BOOST_CHECK_EQUAL(by_enum->second.kind, window_kind::stage_boundary);
  BOOST_CHECK(by_enum->first.members == (std::vector<rank_ref>{{3, 5}}));
  // A peer from before the enums sends the text; the enum wins when both are set.
  v1::FabricIntent text = w;
  text.clear_stage_kind();
  text.clear_primitive_kind();
  text.clear_window_kind();
  text.set_stage("weight-sync");
  text.set_primitive("broadcast");
  text.set_window("before-broadcast");
  auto by_text = wire::intent_of(text);
  BOOST_REQUIRE(by_text);
  BOOST_CHECK_EQUAL(by_text->first.stage, fabric_stage::weight_sync);
  BOOST_CHECK_EQUAL(by_text->second.kind, window_kind::before_broadcast);
  text.set_stage_kind(v1::FABRIC_STAGE_GEN);
  BOOST_CHECK_EQUAL(wire::intent_of(text)->first.stage, fabric_stage::gen);
  // Neither a known text nor an enum: a typed error naming what it got.
  v1::FabricIntent bad = text;
  bad.clear_stage_kind();
  bad.set_stage("warp");
  auto err = wire::intent_of(bad);
  BOOST_REQUIRE(!err);
  BOOST_CHECK_NE(render(err.error()).find("'warp'"), std::string::npos);
}

BOOST_AUTO_TEST_CASE(answers_carry_both_the_enum_and_its_text) {
  v1::FabricDecision d;
  wire::fill(d, fabric_decision{"job", fabric_outcome::deferred, "no window", 3, 4, 5, 0.1, 0});
  BOOST_CHECK_EQUAL(d.outcome(), "deferred");
  BOOST_CHECK_EQUAL(d.outcome_kind(), v1::FABRIC_OUTCOME_DEFERRED);
  v1::JobInfo j;
  wire::fill(j, job_status{"A", job_state::drifted, "", 1.5, 10, "measured"});
  BOOST_CHECK_EQUAL(j.state(), "drifted");
  BOOST_CHECK_EQUAL(j.job_state(), v1::JOB_STATE_DRIFTED);
  v1::SubmitReply s;
  wire::fill(s, placement_reply{"A", placement_kind::rollout_scaling, "g2", {}, {}, 1, 2, ""});
  BOOST_CHECK_EQUAL(s.outcome(), "rollout_scaling");
  BOOST_CHECK_EQUAL(s.placement(), v1::PLACEMENT_KIND_ROLLOUT_SCALING);
  // Actors' errors reach the wire typed.
  BOOST_CHECK_EQUAL(wire::error_code(errc::job_ended), v1::ERROR_JOB_ENDED);
  BOOST_CHECK_EQUAL(wire::error_code(errc::out_of_turn), v1::ERROR_RESTART_ITERATION);
  BOOST_CHECK_EQUAL(wire::error_code(errc::already_exists), v1::ERROR_ALREADY_EXISTS);
  // Roles and phases map both ways; unknown ones are refused.
  BOOST_CHECK_EQUAL(*wire::role_of(v1::ROLE_DRIVER), worker_role::driver);
  BOOST_CHECK_EQUAL(*wire::role_of(v1::ROLE_OCS_AGENT), worker_role::ocs_agent);
  BOOST_CHECK(!wire::role_of(v1::ROLE_UNSPECIFIED));
  for (auto p : all_values<phase_kind>())
    BOOST_CHECK_EQUAL(*wire::phase_of(wire::to_wire(p)), p);
  BOOST_CHECK(!wire::phase_of(v1::PHASE_UNSPECIFIED));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(rate_limits)

BOOST_AUTO_TEST_CASE(a_key_gets_its_burst_then_its_rate_and_other_keys_are_untouched) {
  rate_limiter r{100, 200};
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  int admitted = 0;
  for (int i = 0; i < 1000; ++i)
    admitted += r.admit("K1", t0);
  BOOST_CHECK_EQUAL(admitted, 200);
  BOOST_CHECK(r.admit("K2", t0)); // its own bucket
  // A tenth of a second later: ten more frames, no more.
  admitted = 0;
  for (int i = 0; i < 100; ++i)
    admitted += r.admit("K1", t0 + 100ms);
  BOOST_CHECK_EQUAL(admitted, 10);
  // A long silence refills to the burst, not beyond.
  admitted = 0;
  for (int i = 0; i < 1000; ++i)
    admitted += r.admit("K1", t0 + 1h);
  BOOST_CHECK_EQUAL(admitted, 200);
  rate_limiter off{0, 0};
  for (int i = 0; i < 1000; ++i)
    BOOST_REQUIRE(off.admit("K1", t0));
}

BOOST_AUTO_TEST_SUITE_END()

// The client library's send path (client.cpp): a burst far past the socket's high-water mark
// waits in the client and follows as the peer reads, none lost, in the order sent.
BOOST_AUTO_TEST_SUITE(client_send_path)

BOOST_AUTO_TEST_CASE(a_burst_past_the_high_water_mark_arrives_whole_and_in_order) {
  zmq::context_t ctx;
  zmq::socket_t router{ctx, zmq::socket_type::router};
  auto server = *generate_keypair();
  auto mine = *generate_keypair();
  router.set(zmq::sockopt::curve_server, 1);
  router.set(zmq::sockopt::curve_secretkey, server.secret_key);
  router.set(zmq::sockopt::rcvhwm, 100);
  router.bind("tcp://127.0.0.1:*");
  client_options o;
  o.endpoint = router.get(zmq::sockopt::last_endpoint);
  o.server_public_key = server.public_key;
  o.public_key = mine.public_key;
  o.secret_key = mine.secret_key;
  client c{o};
  constexpr uint32_t burst = 200'000; // megabytes: more than the socket and TCP buffers hold
  for (uint32_t k = 0; k < burst; ++k)
    c.progress("job", k, burst);
  std::this_thread::sleep_for(200ms); // nobody reads: the client holds what the link cannot
  router.set(zmq::sockopt::rcvtimeo, 10'000);
  for (uint32_t k = 0; k < burst; ++k) {
    zmq::message_t id, body;
    BOOST_REQUIRE_MESSAGE(router.recv(id) && router.recv(body), "report " << k << " missing");
    v1::Envelope e;
    BOOST_REQUIRE(e.ParseFromArray(body.data(), int(body.size())));
    BOOST_REQUIRE(e.has_progress());
    BOOST_REQUIRE_EQUAL(e.progress().responses_done(), k);
  }
}

BOOST_AUTO_TEST_SUITE_END()
