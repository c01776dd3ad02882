#define BOOST_TEST_MODULE tl1
#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>
#include <csignal>
#include <barrier>
#include <thread>

#include "drivers/asio.hpp"
#include "drivers/ocs_driver.hpp"
#include "drivers/tl1_client.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "tests/support/process.hpp"

using namespace loom;
using namespace std::chrono_literals;
namespace lt = loom::test;

namespace {

/// A `loom ocs-emu` child process on a free loopback port.
struct emulator {
  lt::child_process proc;
  uint16_t port = 0;

  explicit emulator(std::vector<std::string> extra = {})
    : proc([&] {
        std::vector<std::string> argv{lt::loom_binary(), "ocs-emu", "--port", "0"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return argv;
      }()) {
    auto line = proc.read_until(
      true, [](const std::string& l) { return l.find("event=ocs_emu_listening") != l.npos; }, 30s);
    BOOST_REQUIRE_MESSAGE(line, "emulator did not start: " << proc.stderr_text());
    port = static_cast<uint16_t>(std::stoi(line->substr(line->find("port=") + 5)));
  }

  tl1_endpoint endpoint() const { return {"127.0.0.1", port, "admin", "root"}; }

  /// Stops the emulator and returns its log.
  std::string stop() {
    proc.send_signal(SIGTERM);
    auto status = proc.wait(30s);
    BOOST_CHECK(status && *status == 0);
    proc.drain(5s);
    return proc.stderr_text();
  }
};

tl1_client_options fast_options() {
  tl1_client_options o;
  o.command_timeout = 500ms;
  o.max_attempts = 3;
  o.backoff = 10ms;
  return o;
}


/// Raw TCP, for what no well-behaved client sends.
std::string raw_exchange(uint16_t port, const std::string& bytes, std::chrono::milliseconds wait) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket s{io};
  s.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(s, asio::buffer(bytes));
  std::this_thread::sleep_for(wait);
  std::string got;
  s.non_blocking(true);
  boost::system::error_code ec;
  std::array<char, 65536> buf;
  for (;;) {
    auto n = s.read_some(asio::buffer(buf), ec);
    if (ec)
      break;
    got.append(buf.data(), n);
  }
  return got;
}

} // namespace

BOOST_AUTO_TEST_CASE(create_list_delete_and_ranges) {
  emulator emu{{"--size", "32x32"}};
  tl1_client c{emu.endpoint(), fast_options()};
  auto size = c.size();
  BOOST_REQUIRE(size);
  BOOST_CHECK_EQUAL(size->inputs, 32u);
  BOOST_CHECK_EQUAL(size->outputs, 32u);
  xc_diff d;
  for (uint32_t i = 1; i <= 16; ++i)
    d.adds.push_back({i, 32 + i});
  auto attempts = c.apply(d);
  BOOST_REQUIRE(attempts);
  BOOST_CHECK_EQUAL(*attempts, 1u);
  auto xcs = c.list();
  BOOST_REQUIRE(xcs);
  BOOST_CHECK(*xcs == d.adds);
  // Remove 2..5 (sent as one DLT-PATCH::2&&5) and re-patch 1 to another output.
  xc_diff change{{{1, 33}, {2, 34}, {3, 35}, {4, 36}, {5, 37}}, {{1, 60}}};
  BOOST_REQUIRE(c.apply(change));
  xcs = c.list();
  BOOST_REQUIRE(xcs);
  BOOST_REQUIRE_EQUAL(xcs->size(), 12u);
  BOOST_CHECK(xcs->front() == (cross_connect{1, 60}));
  BOOST_CHECK(xcs->at(1) == (cross_connect{6, 38}));
  emu.stop();
}

BOOST_AUTO_TEST_CASE(deny_paths_map_to_errors) {
  emulator emu{{"--size", "8x8", "--fail-port", "3"}};
  auto bad = emu.endpoint();
  bad.password = "wrong";
  tl1_client intruder{bad, fast_options()};
  BOOST_CHECK(code_of(intruder.list().error()) == errc::driver_auth);

  tl1_client c{emu.endpoint(), fast_options()};
  BOOST_REQUIRE(c.apply({{}, {{1, 9}}}));
  auto busy = c.apply({{}, {{2, 9}}}); // the client sends it; the switch says SAAL
  BOOST_REQUIRE(!busy);
  BOOST_CHECK(code_of(busy.error()) == errc::driver_denied);
  BOOST_CHECK(render(busy.error()).find("SAAL") != std::string::npos);
  auto range = c.apply({{}, {{2, 99}}});
  BOOST_CHECK(render(range.error()).find("IIAC") != std::string::npos);
  auto failed = c.apply({{}, {{3, 10}}});
  BOOST_CHECK(render(failed.error()).find("SROF") != std::string::npos);
  auto gone = c.apply({{{2, 10}}, {}});
  BOOST_CHECK(render(gone.error()).find("SNVS") != std::string::npos);
  emu.stop();
}

BOOST_AUTO_TEST_CASE(dropped_connection_mid_command_is_resumed_without_doing_twice) {
  // The switch makes the 4th change, then drops the session without answering.
  emulator emu{{"--size", "16x16", "--drop-after", "3"}};
  tl1_client c{emu.endpoint(), fast_options()};
  xc_diff d;
  for (uint32_t i = 1; i <= 8; ++i)
    d.adds.push_back({i, 16 + i});
  auto attempts = c.apply(d);
  if (!attempts)
    BOOST_FAIL(render(attempts.error()));
  BOOST_CHECK_EQUAL(*attempts, 2u);
  auto xcs = c.list();
  BOOST_REQUIRE(xcs);
  BOOST_CHECK(*xcs == d.adds);
  auto log = emu.stop();
  BOOST_CHECK(log.find("fault=drop") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(hung_switch_times_out) {
  emulator emu{{"--hang"}};
  auto o = fast_options();
  o.command_timeout = 200ms;
  o.max_attempts = 2;
  tl1_client c{emu.endpoint(), o};
  auto r = c.apply({{}, {{1, 33}}});
  BOOST_REQUIRE(!r);
  BOOST_CHECK(code_of(r.error()) == errc::driver_timeout);
  BOOST_CHECK(!c.connected());
  emu.stop();
}

BOOST_AUTO_TEST_CASE(many_sessions_at_once) {
  emulator emu{{"--size", "64x64"}};
  constexpr int clients = 32;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  // Every client logs in, then all change the switch at once, then all leave.
  std::barrier all_connected{clients};
  std::barrier all_applied{clients};
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      tl1_client c{emu.endpoint(), fast_options()};
      bool up = static_cast<bool>(c.size());
      all_connected.arrive_and_wait();
      auto in = static_cast<uint32_t>(2 * k + 1);
      if (up && c.apply({{}, {{in, 64 + in}, {in + 1, 65 + in}}}))
        ++ok;
      all_applied.arrive_and_wait();
    });
  }
  for (auto& t : threads)
    t.join();
  BOOST_CHECK_EQUAL(ok.load(), clients);
  tl1_client c{emu.endpoint(), fast_options()};
  auto xcs = c.list();
  BOOST_REQUIRE(xcs);
  BOOST_CHECK_EQUAL(xcs->size(), static_cast<size_t>(2 * clients));
  c.disconnect();
  std::this_thread::sleep_for(200ms);
  auto log = emu.stop();
  BOOST_CHECK(log.find("session_opened session=32 sessions=32") != std::string::npos);
  // Every session that opened also closed: the last close leaves zero.
  auto last_close = log.rfind("event=ocs_emu_session_closed");
  BOOST_REQUIRE(last_close != std::string::npos);
  BOOST_CHECK(log.find("sessions=0", last_close) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(survives_garbage_partial_commands_and_huge_lines) {
  emulator emu{{"--size", "8x8"}};
  // Garbage and a huge line without ';': answered with IISP, nothing buffered without bound.
  std::string huge(2 * 1024 * 1024, 'A');
  auto reply = raw_exchange(emu.port, "\x01\x02garbage;" + huge + ";RTRV-NETYPE:::5:;", 500ms);
  BOOST_CHECK(reply.find("IISP") != std::string::npos);
  BOOST_CHECK(reply.find("command too long") != std::string::npos);
  BOOST_CHECK(reply.find("M  5 DENY\r\n   PLNA") != std::string::npos); // session still works
  // A command split over writes, in the same session as a login.
  namespace asio = boost::asio;
  {
    asio::io_context io;
    asio::ip::tcp::socket s{io};
    s.connect({asio::ip::make_address("127.0.0.1"), emu.port});
    asio::write(s, asio::buffer(std::string{"ACT-USER::adm"}));
    std::this_thread::sleep_for(50ms);
    asio::write(s, asio::buffer(std::string{"in:1::root;\r\nRTRV-EQPT::SYSTEM:2:::PARAM"}));
    std::this_thread::sleep_for(50ms);
    asio::write(s, asio::buffer(std::string{"ETER=SIZE;"}));
    std::string got;
    while (got.find("SIZE=8x8") == std::string::npos) {
      std::array<char, 4096> buf;
      boost::system::error_code ec;
      auto n = s.read_some(asio::buffer(buf), ec);
      BOOST_REQUIRE(!ec);
      got.append(buf.data(), n);
    }
    BOOST_CHECK(got.find("M  1 COMPLD") != std::string::npos);
  }
  // Sessions that vanish abruptly, many times.
  for (int i = 0; i < 50; ++i)
    raw_exchange(emu.port, "ENT-PATCH::1,", 0ms);
  tl1_client c{emu.endpoint(), fast_options()};
  BOOST_CHECK(c.list()); // still serving
  c.disconnect();
  std::this_thread::sleep_for(200ms);
  auto log = emu.stop();
  auto last_close = log.rfind("event=ocs_emu_session_closed");
  BOOST_REQUIRE(last_close != std::string::npos);
  BOOST_CHECK(log.find("sessions=0", last_close) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(driver_actor_over_tl1) {
  emulator emu{{"--size", "16x16"}};
  caf::actor_system_config cfg;
  register_loom_types(cfg);
  caf::actor_system sys{cfg};
  tl1_ocs_config conf;
  conf.device = "ocs-tl1";
  conf.endpoint = emu.endpoint();
  conf.options = fast_options();
  conf.masked = {5}; // masked here only: a diff using it must never reach the switch
  auto drv = sys.spawn<caf::detached>(tl1_ocs_driver, conf);
  caf::scoped_actor self{sys};
  auto apply = [&](const xc_diff& d) {
    caf::expected<apply_report> out{apply_report{}};
    self->request(drv, caf::infinite, apply_atom::value, d)
      .receive([&](apply_report r) { out = r; }, [&](caf::error& e) { out = std::move(e); });
    return out;
  };
  auto r = apply({{}, {{1, 17}, {2, 18}}});
  BOOST_REQUIRE(r);
  BOOST_CHECK_GT(r->latency_ns, 0);
  BOOST_CHECK_EQUAL(r->attempts, 1u);
  auto refused = apply({{}, {{5, 20}}});
  BOOST_CHECK(code_of(refused.error()) == errc::driver_refused);
  auto twice = apply({{}, {{3, 20}, {4, 20}}});
  BOOST_CHECK(code_of(twice.error()) == errc::driver_refused);
  self->request(drv, caf::infinite, get_atom::value)
    .receive(
      [&](std::vector<cross_connect>& xcs) {
        std::vector<cross_connect> expected{{1, 17}, {2, 18}};
        BOOST_CHECK(xcs == expected); // nothing of the refused diffs reached the switch
      },
      [&](caf::error& e) { BOOST_FAIL(render(e)); });
  self->request(drv, caf::infinite, health_atom::value)
    .receive(
      [&](driver_health& h) {
        BOOST_CHECK(h.connected);
        BOOST_CHECK_EQUAL(h.applies, 1u);
        BOOST_CHECK_EQUAL(h.failures, 2u);
        BOOST_CHECK_EQUAL(h.cross_connects, 2u);
        BOOST_CHECK_EQUAL(h.inputs, 16u); // the geometry the switch reported
        BOOST_CHECK_EQUAL(h.outputs, 16u);
      },
      [&](caf::error& e) { BOOST_FAIL(render(e)); });
  self->send_exit(drv, caf::exit_reason::user_shutdown);
  emu.stop();
}

namespace {

/// conf/rfabric-tl1.toml with its switches at `pod0` and `pod1` (HOST:PORT), the login in
/// `credentials`, and its storage and gateway in `dir`.
std::string rfabric_tl1_config(const lt::temp_dir& dir, const std::string& pod0,
                               const std::string& pod1, const std::string& credentials) {
  auto text = lt::read_file(lt::source_path("conf/rfabric-tl1.toml"));
  auto replace = [&](const std::string& from, const std::string& to) {
    auto at = text.find(from);
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, "not in the example: " << from);
    text.replace(at, from.size(), to);
  };
  replace("127.0.0.1:3082", pod0);
  replace("127.0.0.1:3083", pod1);
  replace("tcp://127.0.0.1:5555", "tcp://127.0.0.1:" + std::to_string(lt::free_tcp_port()));
  replace("var/rfabric-tl1", dir / "db");
  lt::write_file(dir / "ocs-emu.credentials", credentials);
  auto path = dir / "rfabric-tl1.toml";
  lt::write_file(path, text);
  return path;
}

/// Starts serve on `config`, waits until it has probed both switches and is ready (in either
/// order: a slow build logs ready later), stops it; its log.
std::string probe_log(const std::string& config) {
  lt::child_process serve{{lt::loom_binary(), "serve", "-c", config}};
  int probed = 0;
  bool ready = false;
  auto done = serve.read_until(
    true,
    [&](const std::string& l) {
      probed += l.find("event=ocs_probe") != std::string::npos;
      ready = ready || l.find("event=serve_ready") != std::string::npos;
      return probed == 2 && ready;
    },
    30s);
  BOOST_CHECK_MESSAGE(done, "serve did not probe both switches and start:\n"
                              << serve.stderr_text());
  serve.send_signal(SIGTERM);
  auto status = serve.wait(30s);
  BOOST_CHECK(status && *status == 0);
  serve.drain(5s);
  return serve.stderr_text();
}

} // namespace

BOOST_AUTO_TEST_CASE(serve_reads_every_switch_back_at_start_and_starts_whatever_it_finds) {
  // The bundled RFabric-over-TL1 example, against two emulators with the example's login.
  emulator pod0{{"--size", "32x32", "--user", "loom", "--password", "emu-secret"}};
  auto login = pod0.endpoint();
  login.user = "loom";
  login.password = "emu-secret";
  BOOST_REQUIRE(tl1_client(login, fast_options()).apply({{}, {{1, 33}, {2, 34}}}));
  const auto closed = "127.0.0.1:" + std::to_string(lt::free_tcp_port());
  const auto pod0_at = "127.0.0.1:" + std::to_string(pod0.port);
  const auto credentials = lt::read_file(lt::source_path("conf/ocs-emu.credentials"));
  {
    // pod1's switch is down: reported, and serve runs anyway.
    lt::temp_dir dir;
    auto log = probe_log(rfabric_tl1_config(dir, pod0_at, closed, credentials));
    BOOST_CHECK_MESSAGE(log.find("event=ocs_probe device=agg-pod0 address=" + pod0_at
                                 + " size=32x32 cross_connects=2")
                          != std::string::npos,
                        log);
    BOOST_CHECK(log.find("event=ocs_probe_failed device=agg-pod1 address=" + closed)
                != std::string::npos);
    BOOST_CHECK(log.find("event=serve_ready") != std::string::npos);
  }
  {
    // A login the switch refuses.
    lt::temp_dir dir;
    auto log = probe_log(rfabric_tl1_config(dir, pod0_at, closed, "loom:not-the-password\n"));
    BOOST_CHECK_MESSAGE(log.find("event=ocs_probe_failed device=agg-pod0") != std::string::npos
                          && log.find("driver_auth") != std::string::npos,
                        log);
  }
  {
    // A switch smaller than the config says.
    lt::temp_dir dir;
    emulator small{{"--size", "16x16", "--user", "loom", "--password", "emu-secret"}};
    auto log = probe_log(rfabric_tl1_config(dir, pod0_at,
                                            "127.0.0.1:" + std::to_string(small.port),
                                            credentials));
    BOOST_CHECK_MESSAGE(log.find("event=ocs_probe_mismatch device=agg-pod1") != std::string::npos
                          && log.find("size=16x16 expected=32x32") != std::string::npos,
                        log);
    small.stop();
  }
  pod0.stop();
}
