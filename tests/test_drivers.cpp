#define BOOST_TEST_MODULE drivers
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <caf/all.hpp>
#include <cmath>

#include "drivers/latency_model.hpp"
#include "drivers/ocs_driver.hpp"
#include "drivers/tl1_codec.hpp"
#include "drivers/xc_table.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "replay/driver.hpp"

using namespace loom;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_SUITE(cross_connect_model)

BOOST_AUTO_TEST_CASE(refuses_every_violation_with_its_kind) {
  xc_table t{{8, 8}, {5}};
  t.apply({{}, {{1, 9}, {2, 10}}});
  using k = xc_violation::kind;
  auto kind_of = [&](const xc_diff& d) {
    auto v = t.check(d);
    BOOST_REQUIRE(v);
    return v->what;
  };
  BOOST_CHECK(kind_of({{}, {{9, 10}}}) == k::invalid_port);  // output used as input
  BOOST_CHECK(kind_of({{}, {{3, 17}}}) == k::invalid_port);  // beyond N + M
  BOOST_CHECK(kind_of({{}, {{3, 3}}}) == k::invalid_port);   // input used as output
  BOOST_CHECK(kind_of({{}, {{5, 11}}}) == k::masked_port);
  BOOST_CHECK(kind_of({{}, {{3, 11}, {4, 11}}}) == k::duplicate_port);
  BOOST_CHECK(kind_of({{}, {{1, 11}}}) == k::port_in_use);   // input 1 is patched to 9
  BOOST_CHECK(kind_of({{}, {{3, 9}}}) == k::port_in_use);    // output 9 is patched to 1
  BOOST_CHECK(kind_of({{{1, 10}}, {}}) == k::no_such_cross_connect);
  BOOST_CHECK_EQUAL(t.check({{}, {{3, 9}}})->port, 9u);
}

BOOST_AUTO_TEST_CASE(repatching_is_remove_then_add) {
  xc_table t{{8, 8}};
  t.apply({{}, {{1, 9}, {2, 10}, {3, 11}}});
  xc_diff swap{{{1, 9}, {2, 10}}, {{1, 10}, {2, 9}}};
  BOOST_REQUIRE(!t.check(swap));
  t.apply(swap);
  std::vector<cross_connect> expected{{1, 10}, {2, 9}, {3, 11}};
  BOOST_CHECK(t.list() == expected); // 3,11 untouched
  BOOST_CHECK_EQUAL(t.size(), 3u);
}

BOOST_AUTO_TEST_CASE(diff_to_touches_only_what_changes) {
  xc_table t{{8, 8}};
  t.apply({{}, {{1, 9}, {2, 10}, {3, 11}}});
  auto d = t.diff_to({{1, 9}, {2, 12}, {4, 13}});
  std::vector<cross_connect> removes{{2, 10}, {3, 11}};
  std::vector<cross_connect> adds{{2, 12}, {4, 13}};
  BOOST_CHECK(d.removes == removes);
  BOOST_CHECK(d.adds == adds);
  BOOST_REQUIRE(!t.check(d));
  t.apply(d);
  std::vector<cross_connect> after{{1, 9}, {2, 12}, {4, 13}};
  BOOST_CHECK(t.list() == after);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tl1_codec)

BOOST_AUTO_TEST_CASE(port_lists_round_trip) {
  BOOST_CHECK_EQUAL(tl1::format_ports({7, 1, 2, 3, 4, 9, 10}), "1&&4&7&9&10");
  auto parsed = std::get<std::vector<uint32_t>>(tl1::parse_ports("1&&4&7&9&10"));
  std::vector<uint32_t> expected{1, 2, 3, 4, 7, 9, 10};
  BOOST_CHECK(parsed == expected);
  for (auto bad : {"", "0", "a", "3&&1", "1&", "1&&", "&1"})
    BOOST_CHECK_MESSAGE(std::holds_alternative<std::string>(tl1::parse_ports(bad)), bad);
  BOOST_CHECK(std::holds_alternative<std::string>(tl1::parse_ports("1&&100000", 4096)));
}

BOOST_AUTO_TEST_CASE(commands_accept_every_tid_form) {
  for (auto text : {"ENT-PATCH::1,9:42:", "ent-patch:SW1:1,9:42:", "ENT-PATCH:\"SW:1\":1,9:42:"}) {
    auto c = tl1::parse_command(text);
    BOOST_REQUIRE_MESSAGE(c, text);
    BOOST_CHECK_EQUAL(c->verb, "ENT-PATCH");
    BOOST_CHECK_EQUAL(c->aid, "1,9");
    BOOST_CHECK_EQUAL(c->ctag, "42");
  }
  auto login = tl1::parse_command("ACT-USER::admin:7::root");
  BOOST_REQUIRE(login);
  BOOST_CHECK_EQUAL(login->rest.at(1), "root");
  BOOST_CHECK(!tl1::parse_command("garbage"));
  BOOST_CHECK(!tl1::valid_ctag(""));
  BOOST_CHECK(!tl1::valid_ctag("a b"));
}

BOOST_AUTO_TEST_CASE(splitter_ignores_line_endings_and_bounds_memory) {
  tl1::command_splitter split{16};
  std::vector<tl1::command_splitter::item> out;
  split.feed("A:::1:;\r\nB:::", out);
  split.feed("2:;\nC:::3:;;", out);
  BOOST_REQUIRE_EQUAL(out.size(), 3u);
  BOOST_CHECK_EQUAL(out[1].text, "B:::2:");
  out.clear();
  split.feed(std::string(1000, 'x'), out);
  split.feed("x;D:::4:;", out);
  BOOST_REQUIRE_EQUAL(out.size(), 2u);
  BOOST_CHECK(out[0].overflow);
  BOOST_CHECK_EQUAL(out[1].text, "D:::4:");
}

// Replies framed as GR-831 frames them and real switches send them: a ';' with no line break
// after it (CR LF LF leads the next), a reply continued under the same ctag with '>', and a
// peer that sends endless data for one reply (memory stays bounded).
BOOST_AUTO_TEST_CASE(replies_framed_by_gr831_bare_terminators_and_continuations) {
  tl1::reply_parser parser;
  parser.feed("\r\n\n   SW 26-11-27 10:00:00\r\nM  5 COMPLD\r\n   \"1,33\"\r\n;");
  auto bare = parser.next();
  BOOST_REQUIRE(bare);
  BOOST_CHECK_EQUAL(bare->ctag, "5");
  BOOST_CHECK(bare->data == std::vector<std::string>{"1,33"});
  parser.feed("\r\n\n   SW 26-11-27 10:00:01\r\nM  6 COMPLD\r\n   \"1,33\"\r\n   \"2,34\"\r\n>"
              "\r\n\n   SW 26-11-27 10:00:01\r\nM  6 COMPLD\r\n   \"3,35\"\r\n;\r\n");
  auto joined = parser.next();
  BOOST_REQUIRE(joined);
  BOOST_CHECK((joined->data == std::vector<std::string>{"1,33", "2,34", "3,35"}));
  BOOST_CHECK(!parser.next());
  tl1::reply_parser bounded{65536, 1 << 16};
  bounded.feed("M  7 COMPLD\r\n");
  for (int i = 0; i < 10000 && !bounded.failed(); ++i)
    bounded.feed("   \"1,2\"\r\n");
  BOOST_CHECK(bounded.failed());
}

BOOST_AUTO_TEST_CASE(alarm_lines_in_gr833_and_vendor_layouts) {
  BOOST_CHECK_EQUAL(tl1::alarmed_port("3:MJ,LOS,SA").value_or(0), 3u);
  BOOST_CHECK_EQUAL(tl1::alarmed_port("17,PORT:MJ,LOS,SA,11-27,10-00-00").value_or(0), 17u);
  BOOST_CHECK(!tl1::alarmed_port("FAN-2,EQPT:MN,FANFLT,NSA"));
  BOOST_CHECK(!tl1::alarmed_port("PSU-1,EQPT:CR,PWR,SA"));
  BOOST_CHECK(!tl1::alarmed_port("garbage"));
  BOOST_CHECK(!tl1::alarmed_port("12"));
}

BOOST_AUTO_TEST_CASE(replies_round_trip_and_never_carry_a_semicolon) {
  tl1::reply deny{"17", false, {}, "SAAL", "port 3 in use; try another"};
  auto text = tl1::format_reply("SW", "26-11-21", "10:00:00", deny);
  BOOST_CHECK_EQUAL(std::count(text.begin(), text.end(), ';'), 1);
  BOOST_CHECK(text.find("\r\nM  17 DENY\r\n") != std::string::npos);
  tl1::reply ok{"18", true, {"1,9", "2,10"}, {}, {}};
  tl1::reply_parser parser;
  auto both = text + tl1::format_reply("SW", "26-11-21", "10:00:00", ok);
  parser.feed(both.substr(0, 30)); // arrives in pieces
  BOOST_CHECK(!parser.next());
  parser.feed(both.substr(30));
  auto a = parser.next();
  auto b = parser.next();
  BOOST_REQUIRE(a && b);
  BOOST_CHECK(!a->completed);
  BOOST_CHECK_EQUAL(a->code, "SAAL");
  BOOST_CHECK_EQUAL(a->reason, "port 3 in use, try another");
  BOOST_CHECK(b->completed);
  BOOST_CHECK(b->data == ok.data);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(latency_samples_match_the_profile) {
  auto profile = latency_profile::mfabric_measured();
  latency_sampler s{profile, 3};
  std::vector<double> ms;
  for (int i = 0; i < 200000; ++i)
    ms.push_back(static_cast<double>(s.sample().count()) / 1e6);
  double mean = 0;
  for (auto v : ms)
    mean += v / static_cast<double>(ms.size());
  std::nth_element(ms.begin(), ms.begin() + 198000, ms.end());
  BOOST_CHECK_CLOSE(mean, profile.mean_ms, 1.0);
  BOOST_CHECK_CLOSE(ms[198000], profile.p99_ms, 2.0);
  latency_sampler a{profile, 9};
  latency_sampler b{profile, 9};
  for (int i = 0; i < 100; ++i)
    BOOST_REQUIRE(a.sample() == b.sample());
}

BOOST_AUTO_TEST_SUITE(emulated_driver)

namespace {

/// Outcome of one request to a driver, as seen by a client actor on the virtual clock.
struct outcome {
  std::optional<apply_report> report;
  caf::error error;
  caf::timespan answered_after{0};
};

/// Sends one apply from a client actor and records what comes back, and when.
void apply(replay::driver& drv, const emulated_ocs_actor& ocs, xc_diff diff, outcome& out) {
  drv.system().spawn([ocs, diff, &out](caf::event_based_actor* self) {
    auto start = self->clock().now();
    self->request(ocs, caf::infinite, apply_atom::value, diff)
      .then(
        [=, &out](apply_report r) {
          out.report = r;
          out.answered_after = self->clock().now() - start;
        },
        [=, &out](caf::error& e) {
          out.error = e;
          out.answered_after = self->clock().now() - start;
        });
  });
  drv.run_to_quiescence();
}


emulated_ocs_config config(uint64_t seed = 1) {
  emulated_ocs_config c;
  c.device = "ocs-test";
  c.size = {16, 16};
  c.masked = {4};
  c.link_up_delay = 2s;
  c.seed = seed;
  return c;
}

} // namespace

BOOST_AUTO_TEST_CASE(answers_after_the_sampled_latency_in_virtual_time) {
  replay::driver drv;
  auto ocs = drv.system().spawn(emulated_ocs, config(5));
  outcome out;
  apply(drv, ocs, {{}, {{1, 17}, {2, 18}}}, out);
  BOOST_REQUIRE(out.report);
  latency_sampler expected{latency_profile::mfabric_measured(), 5};
  BOOST_CHECK_EQUAL(out.report->latency_ns, expected.sample().count());
  BOOST_CHECK(out.answered_after == caf::timespan{out.report->latency_ns});
  BOOST_CHECK_EQUAL(out.report->ready_ns, out.report->latency_ns + caf::timespan{2s}.count());
  outcome again;
  apply(drv, ocs, {{{1, 17}}, {{1, 19}}}, again);
  BOOST_REQUIRE(again.report);
  caf::anon_send_exit(ocs, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(refuses_model_violations_before_touching_the_device) {
  replay::driver drv;
  auto ocs = drv.system().spawn(emulated_ocs, config());
  outcome setup;
  apply(drv, ocs, {{}, {{1, 17}}}, setup);
  BOOST_REQUIRE(setup.report);
  for (auto bad : std::vector<xc_diff>{{{}, {{2, 18}, {3, 18}}}, // port used twice
                                       {{}, {{2, 40}}},          // out of range
                                       {{}, {{4, 18}}},          // masked
                                       {{}, {{1, 18}}},          // busy
                                       {{{2, 18}}, {}}}) {       // no such cross-connect
    outcome out;
    apply(drv, ocs, bad, out);
    BOOST_CHECK(code_of(out.error) == errc::driver_refused);
    BOOST_CHECK(out.answered_after == caf::timespan{0});
  }
  caf::anon_send_exit(ocs, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(injected_faults) {
  replay::driver drv;
  auto ocs = drv.system().spawn(emulated_ocs, config());
  drv.system().spawn([ocs](caf::event_based_actor* self) {
    ocs_fault f;
    f.failed_ports = {7};
    f.refuse_next = 1;
    f.timeout_next = 1;
    self->request(ocs, caf::infinite, fault_atom::value, f).then([](ok_atom) {});
  });
  drv.run_to_quiescence();
  outcome failed_port;
  apply(drv, ocs, {{}, {{7, 20}}}, failed_port);
  BOOST_CHECK(code_of(failed_port.error) == errc::driver_denied);
  outcome refused;
  apply(drv, ocs, {{}, {{8, 20}}}, refused);
  BOOST_CHECK(code_of(refused.error) == errc::driver_denied);
  outcome timed_out;
  apply(drv, ocs, {{}, {{8, 20}}}, timed_out);
  BOOST_CHECK(code_of(timed_out.error) == errc::driver_timeout);
  BOOST_CHECK(timed_out.answered_after == caf::timespan{2s});
  outcome ok; // faults used up: the same change now goes through
  apply(drv, ocs, {{}, {{8, 20}}}, ok);
  BOOST_CHECK(ok.report);
  caf::anon_send_exit(ocs, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_SUITE_END()
