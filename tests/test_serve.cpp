#define BOOST_TEST_MODULE serve
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "config/config.hpp"
#include "tests/support/process.hpp"

using namespace std::chrono_literals;
namespace lt = loom::test;

namespace {

// Guards against a hung child; not timing goals (shutdown time is measured in the closing note).
constexpr auto start_limit = 60s;
constexpr auto stop_limit = 30s;

/// The embedded defaults, with a free metrics port and storage in `dir`.
std::string test_config(const lt::temp_dir& dir) {
  std::string text{loom::embedded_config_text()};
  auto replace = [&](const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    BOOST_REQUIRE(pos != std::string::npos);
    text.replace(pos, from.size(), to);
  };
  replace("metrics = \"127.0.0.1:9464\"", "metrics = \"127.0.0.1:0\"");
  replace("gateway = \"tcp://127.0.0.1:5555\"",
          "gateway = \"tcp://127.0.0.1:" + std::to_string(lt::free_tcp_port()) + "\"");
  replace("path = \"var/loom\"", "path = \"" + (dir / "db") + "\"");
  auto path = dir / "loom.toml";
  lt::write_file(path, text);
  return path;
}

/// Starts `loom serve`, waits until it is ready and returns the metrics port.
int await_ready(lt::child_process& serve) {
  int port = -1;
  auto ready = serve.read_until(
    true,
    [&](const std::string& line) {
      auto pos = line.find("event=metrics_listening");
      if (pos != std::string::npos)
        port = std::stoi(line.substr(line.find("port=", pos) + 5));
      return line.find("event=serve_ready") != std::string::npos;
    },
    start_limit);
  BOOST_REQUIRE_MESSAGE(ready, "serve did not get ready:\n" << serve.stderr_text());
  BOOST_REQUIRE_GT(port, 0);
  return port;
}

void stop_and_expect_clean_exit(lt::child_process& serve, int sig) {
  serve.send_signal(sig);
  auto status = serve.wait(stop_limit);
  BOOST_REQUIRE_MESSAGE(status, "serve did not stop");
  BOOST_CHECK_EQUAL(*status, 0);
  serve.drain(5s);
  auto log = serve.stderr_text();
  BOOST_CHECK(log.find("event=shutdown_requested") != std::string::npos);
  BOOST_CHECK(log.find("event=store_closed") != std::string::npos);
  BOOST_CHECK(log.find("event=serve_stopped exit_code=0") != std::string::npos);
}

} // namespace

BOOST_AUTO_TEST_CASE(serves_metrics_and_stops_on_sigterm) {
  lt::temp_dir dir;
  auto conf = test_config(dir);
  lt::child_process serve{{lt::loom_binary(), "serve", "-c", conf}};
  int port = await_ready(serve);

  auto response = lt::http_get(port, "/metrics");
  BOOST_CHECK(response.rfind("HTTP/1.1 200", 0) == 0);
  BOOST_CHECK(response.find("text/plain") != std::string::npos);
  for (auto metric : {"loom_actors_up{actor=\"store\"} 1", "loom_config_generation 1",
                      "loom_store_batches_total", "# TYPE process_cpu_seconds_total counter",
                      "process_resident_memory_bytes", "process_open_fds"})
    BOOST_CHECK_MESSAGE(response.find(metric) != std::string::npos, "missing " << metric);
  BOOST_CHECK(std::filesystem::exists(dir / "db/CURRENT"));
  // Readiness for load balancers and systemd (#40 item 11): 200 once ready.
  auto health = lt::http_get(port, "/healthz");
  BOOST_CHECK_MESSAGE(health.rfind("HTTP/1.1 200", 0) == 0, health);
  BOOST_CHECK(health.find("\r\n\r\nready\n") != std::string::npos);
  BOOST_CHECK(lt::http_get(port, "/nothing").rfind("HTTP/1.1 404", 0) == 0);

  stop_and_expect_clean_exit(serve, SIGTERM);
}

BOOST_AUTO_TEST_CASE(stops_on_sigint_and_reopens_its_storage) {
  lt::temp_dir dir;
  auto conf = test_config(dir);
  for (int run = 0; run < 2; ++run) {
    lt::child_process serve{{lt::loom_binary(), "serve", "-c", conf}};
    await_ready(serve);
    stop_and_expect_clean_exit(serve, SIGINT);
  }
}

BOOST_AUTO_TEST_CASE(second_instance_on_the_same_storage_is_refused) {
  lt::temp_dir dir;
  auto conf = test_config(dir);
  lt::child_process first{{lt::loom_binary(), "serve", "-c", conf}};
  await_ready(first);
  auto second = lt::run({lt::loom_binary(), "serve", "-c", conf});
  BOOST_CHECK_EQUAL(second.exit_code, 1);
  BOOST_CHECK(second.err.find("in use by another process") != std::string::npos);
  stop_and_expect_clean_exit(first, SIGTERM);
}

BOOST_AUTO_TEST_CASE(broken_config_exits_2_naming_file_line_and_key) {
  lt::temp_dir dir;
  std::string text{loom::embedded_config_text()};
  auto pos = text.find("cross_link_gbps = 20.0");
  BOOST_REQUIRE(pos != std::string::npos);
  text.replace(pos, 22, "cross_link_gbps = \"fast\"");
  int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
  auto path = dir / "broken.toml";
  lt::write_file(path, text);
  auto r = lt::run({lt::loom_binary(), "serve", "-c", path});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK_MESSAGE(r.err.find(path + ":" + std::to_string(line) + ":") != std::string::npos,
                      r.err);
  BOOST_CHECK(r.err.find("cluster.cross_link_gbps: expected a number, got a string")
              != std::string::npos);
  BOOST_CHECK(!std::filesystem::exists(dir / "db"));
}

BOOST_AUTO_TEST_CASE(help_says_what_each_command_does) {
  auto top = lt::run({lt::loom_binary(), "--help"});
  BOOST_CHECK_EQUAL(top.exit_code, 0);
  BOOST_CHECK(top.out.find("serve") != std::string::npos);
  BOOST_CHECK(top.out.find("check-config") != std::string::npos);
  auto serve = lt::run({lt::loom_binary(), "serve", "--help"});
  BOOST_CHECK_EQUAL(serve.exit_code, 0);
  BOOST_CHECK(serve.out.find("SIGINT/SIGTERM") != std::string::npos);
  BOOST_CHECK(serve.out.find("SIGHUP") != std::string::npos);
  BOOST_CHECK(serve.out.find("--config") != std::string::npos);
  auto check = lt::run({lt::loom_binary(), "check-config", "--help"});
  BOOST_CHECK_EQUAL(check.exit_code, 0);
  BOOST_CHECK(check.out.find("Validate") != std::string::npos);
  auto emu = lt::run({lt::loom_binary(), "ocs-emu", "--help"});
  BOOST_CHECK_EQUAL(emu.exit_code, 0);
  BOOST_CHECK(emu.out.find("TL1") != std::string::npos);
  BOOST_CHECK(emu.out.find("--drop-after") != std::string::npos);
}

// An example client given key files that are not there says which and exits 2 (#40 item 8:
// it aborted with rc 134 in the socket's setup).
BOOST_AUTO_TEST_CASE(an_example_client_without_its_key_files_says_which_and_exits_2) {
  lt::temp_dir dir;
  const char* worker = std::getenv("LOOM_EXAMPLE_WORKER");
  BOOST_REQUIRE_MESSAGE(worker, "LOOM_EXAMPLE_WORKER is not set (run the tests via meson test)");
  auto r = lt::run({worker, "--endpoint", "tcp://127.0.0.1:1", "--server-key",
                    dir / "server.pub", "--key", dir / "w", "--job", "j"});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  BOOST_CHECK_MESSAGE(r.err.find(dir / "server.pub") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(ocs_emu_rejects_a_bad_size) {
  for (auto size : {"32x32x", "0x4", "abc"}) {
    auto r = lt::run({lt::loom_binary(), "ocs-emu", "--size", size, "--port", "0"});
    BOOST_CHECK_EQUAL(r.exit_code, 2);
    BOOST_CHECK(r.err.find("is not NxM") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(operators_override_endpoints_and_storage_and_see_every_actor) {
  lt::temp_dir dir;
  auto conf = test_config(dir);
  const int gateway_port = lt::free_tcp_port();
  lt::child_process serve{{lt::loom_binary(), "serve", "-c", conf, "--storage", dir / "other",
                           "--gateway", "tcp://127.0.0.1:" + std::to_string(gateway_port),
                           "--metrics", "127.0.0.1:0"}};
  int port = await_ready(serve);
  BOOST_CHECK(std::filesystem::exists(dir / "other/CURRENT"));
  BOOST_CHECK(!std::filesystem::exists(dir / "db"));
  BOOST_CHECK(serve.stderr_text().find("endpoint=tcp://127.0.0.1:" + std::to_string(gateway_port))
              != std::string::npos);
  // The admin CLI reaches it with the same overrides (its keys are under the other storage).
  auto jobs = lt::run({lt::loom_binary(), "jobs", "-c", conf, "--storage", dir / "other",
                       "--gateway", "tcp://127.0.0.1:" + std::to_string(gateway_port)});
  BOOST_CHECK_MESSAGE(jobs.exit_code == 0 && jobs.out.find("JOB") != std::string::npos,
                      jobs.out << jobs.err);
  auto elsewhere = lt::run({lt::loom_binary(), "jobs", "-c", conf, "--gateway", "localhost"});
  BOOST_CHECK_EQUAL(elsewhere.exit_code, 2);
  auto response = lt::http_get(port, "/metrics");
  for (auto actor : {"store", "gateway", "cluster_scheduler", "metrics_observer",
                     "fabric_controller", "ocs_driver", "gen_controller", "gen_planner",
                     "balancer", "gen_metrics"})
    BOOST_CHECK_MESSAGE(response.find(std::string{"loom_actors_up{actor=\""} + actor + "\"} 1")
                          != std::string::npos,
                        "loom_actors_up lacks " << actor);
  stop_and_expect_clean_exit(serve, SIGTERM);
  // A bad override is a config error: exit 2, nothing started.
  auto bad = lt::run({lt::loom_binary(), "serve", "-c", conf, "--gateway", "localhost"});
  BOOST_CHECK_EQUAL(bad.exit_code, 2);
  BOOST_CHECK(bad.err.find("--gateway: 'localhost' is not a ZeroMQ endpoint") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_stale_server_key_and_an_unknown_client_key_are_named_on_both_sides) {
  // #40 item 8: either mismatch was a silent "no answer".
  lt::temp_dir dir;
  auto conf = test_config(dir);
  lt::child_process serve{{lt::loom_binary(), "serve", "-c", conf}};
  await_ready(serve);
  BOOST_REQUIRE_EQUAL(
    lt::run({lt::loom_binary(), "keygen", "other", "--out", dir / "k"}).exit_code, 0);
  const auto server_pub = dir / "db/keys/server.pub";
  const auto good = lt::read_file(server_pub);
  auto jobs = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{lt::loom_binary(), "jobs", "-c", conf, "--timeout-ms", "2000"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return lt::run(argv);
  };
  std::filesystem::copy_file(dir / "k/other.pub", server_pub,
                             std::filesystem::copy_options::overwrite_existing);
  // The client names the mismatch after its timeout; the service logs its side.
  auto named = [&](std::vector<std::string> extra, const std::string& client_says,
                   const std::string& service_logs) {
    auto r = jobs(std::move(extra));
    BOOST_CHECK_EQUAL(r.exit_code, 1);
    BOOST_CHECK_MESSAGE(r.err.find(client_says) != std::string::npos, r.err);
    BOOST_CHECK(serve.read_until(
      true, [&](const std::string& l) { return l.find(service_logs) != l.npos; }, start_limit));
  };
  named({}, "the server key is not this service's", "event=gateway_handshake_failed");
  lt::write_file(server_pub, good);
  named({"--key", dir / "k/other"}, "the service refused this client's key",
        "event=gateway_key_refused");
  BOOST_CHECK_EQUAL(jobs({}).exit_code, 0); // the right keys still get in
  stop_and_expect_clean_exit(serve, SIGTERM);
}

BOOST_AUTO_TEST_CASE(keygen_keeps_a_key_pair_unless_forced_and_configs_name_missing_keys) {
  lt::temp_dir dir;
  auto keygen = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{lt::loom_binary(), "keygen", "w", "--out", dir / "keys"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return lt::run(argv);
  };
  BOOST_REQUIRE_EQUAL(keygen({}).exit_code, 0);
  auto pub = lt::read_file(dir / "keys/w.pub");
  auto again = keygen({});
  BOOST_CHECK_EQUAL(again.exit_code, 1);
  BOOST_CHECK(again.err.find("Pass --force") != std::string::npos);
  BOOST_CHECK_EQUAL(lt::read_file(dir / "keys/w.pub"), pub);
  BOOST_CHECK_EQUAL(keygen({"--force"}).exit_code, 0);
  BOOST_CHECK_NE(lt::read_file(dir / "keys/w.pub"), pub);
  // A client key file the config lists but nobody made: named with file, line and key.
  std::string text{loom::embedded_config_text()};
  auto pos = text.find("rollout = []");
  BOOST_REQUIRE(pos != std::string::npos);
  text.replace(pos, 12, "rollout = [\"keys/w.pub\", \"keys/missing.pub\"]");
  lt::write_file(dir / "loom.toml", text);
  auto check = lt::run({lt::loom_binary(), "check-config", dir / "loom.toml"});
  BOOST_CHECK_EQUAL(check.exit_code, 2);
  BOOST_CHECK_MESSAGE(check.err.find("security.clients.rollout: key file '" + (dir / "keys/missing.pub")
                                     + "' does not exist")
                        != std::string::npos,
                      check.err);
  BOOST_CHECK(check.err.find("w.pub") == std::string::npos);
}
