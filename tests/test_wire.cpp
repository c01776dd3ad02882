#define BOOST_TEST_MODULE wire
#include <boost/test/unit_test.hpp>

#include "core/error.hpp"
#include "gateway/grant_matcher.hpp"
#include "gateway/sessions.hpp"
#include "gateway/wire.hpp"

using namespace loom;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(run_permits)

BOOST_AUTO_TEST_CASE(an_acquire_waits_for_the_permit_and_a_permit_for_the_acquire) {
  grant_matcher m;
  auto t0 = std::chrono::steady_clock::time_point{};
  // The worker asks first: it waits, and the permit answers it (and only it).
  BOOST_CHECK(!m.acquire("A", phase_kind::rollout, {"w1", 7, t0}));
  BOOST_CHECK_EQUAL(m.waiting(), 1u);
  BOOST_CHECK(m.grant({"A", phase_kind::training, 8, 0, false}).empty()); // another phase
  auto answered = m.grant({"A", phase_kind::rollout, 8, 1.5, true});
  BOOST_REQUIRE_EQUAL(answered.size(), 1u);
  BOOST_CHECK_EQUAL(answered[0].identity, "w1");
  BOOST_CHECK_EQUAL(answered[0].request_id, 7u);
  // The training permit came first: it was kept, and the next acquire takes it at once.
  auto kept = m.acquire("A", phase_kind::training, {"w1", 8, t0});
  BOOST_REQUIRE(kept);
  BOOST_CHECK_EQUAL(kept->gpus, 8);
  BOOST_CHECK(!m.acquire("A", phase_kind::training, {"w1", 9, t0})); // consumed
  BOOST_CHECK_EQUAL(m.kept(), 0u);
}

BOOST_AUTO_TEST_CASE(a_job_that_leaves_takes_its_waiters_and_permits_along) {
  grant_matcher m;
  auto t0 = std::chrono::steady_clock::time_point{};
  m.acquire("A", phase_kind::rollout, {"w1", 1, t0});
  m.acquire("A", phase_kind::sync, {"w2", 2, t0});
  m.acquire("B", phase_kind::rollout, {"w3", 3, t0});
  m.grant({"A", phase_kind::training, 8, 0, false});
  auto dropped = m.drop("A");
  BOOST_CHECK_EQUAL(dropped.size(), 2u);
  BOOST_CHECK_EQUAL(m.waiting(), 1u); // B's
  BOOST_CHECK_EQUAL(m.kept(), 0u);
  BOOST_CHECK_EQUAL(m.grant({"B", phase_kind::rollout, 8, 0, false}).size(), 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(sessions)

BOOST_AUTO_TEST_CASE(a_worker_id_resumes_on_a_new_connection_and_silence_expires_it) {
  session_table t;
  auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  BOOST_CHECK(!t.open("w1", {"conn-1", worker_role::rollout, "n0", "A", t0}));
  BOOST_CHECK(!t.open("admin", {"conn-2", worker_role::admin, "", "", t0}));
  BOOST_REQUIRE(t.worker_of("conn-1"));
  // The same worker id on another connection takes the session over.
  BOOST_CHECK(t.open("w1", {"conn-3", worker_role::rollout, "n0", "A", t0}));
  BOOST_CHECK(!t.worker_of("conn-1"));
  BOOST_CHECK(t.identities_of("A") == std::vector<std::string>{"conn-3"});
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
  // Roles and phases map both ways; unknown ones are refused.
  BOOST_CHECK_EQUAL(*wire::role_of(v1::ROLE_OCS_AGENT), worker_role::ocs_agent);
  BOOST_CHECK(!wire::role_of(v1::ROLE_UNSPECIFIED));
  for (auto p : all_values<phase_kind>())
    BOOST_CHECK_EQUAL(*wire::phase_of(wire::to_wire(p)), p);
  BOOST_CHECK(!wire::phase_of(v1::PHASE_UNSPECIFIED));
}

BOOST_AUTO_TEST_SUITE_END()
