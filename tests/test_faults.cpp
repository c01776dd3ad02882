#define BOOST_TEST_MODULE faults
#include <boost/test/unit_test.hpp>

// Real `loom serve` and `loom ocs-emu` processes against the faults an operator meets: a disk
// that fills up (a real tmpfs), a damaged write-ahead log, a lost keys directory, settings
// that would wrap, and TL1 clients that never log in.

#include <sys/mount.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <boost/asio.hpp>

#include "loom.pb.h"
#include "loom/client.hpp"
#include "tests/support/live_service.hpp"

using namespace std::chrono_literals;
namespace lt = loom::test;

namespace {

/// A tmpfs of `bytes` mounted at `path` for the scope (the test suite runs as root).
class small_disk {
public:
  small_disk(const std::string& path, size_t bytes) : path_(path) {
    std::filesystem::create_directories(path);
    auto opts = "size=" + std::to_string(bytes);
    BOOST_REQUIRE_MESSAGE(::mount("tmpfs", path.c_str(), "tmpfs", 0, opts.c_str()) == 0,
                          "cannot mount a tmpfs at " << path << " (run as root): "
                                                     << std::strerror(errno));
  }
  ~small_disk() { ::umount2(path_.c_str(), MNT_DETACH); }

  /// Writes a file until the disk has no byte left.
  void fill() {
    std::ofstream f{path_ + "/filler", std::ios::binary | std::ios::app};
    std::string block(4096, 'x');
    while (f.write(block.data(), std::streamsize(block.size())) && f.flush()) {
    }
  }
  void free_space() { std::filesystem::remove(path_ + "/filler"); }
  /// Remounts it read-only or read-write again.
  void remount(bool read_only) {
    BOOST_REQUIRE(::mount(nullptr, path_.c_str(), nullptr,
                          MS_REMOUNT | (read_only ? MS_RDONLY : 0), nullptr)
                  == 0);
  }

private:
  std::string path_;
};

int metrics_port(const lt::child_process& serve) {
  auto log = serve.stderr_text();
  auto pos = log.find("event=metrics_listening");
  BOOST_REQUIRE(pos != std::string::npos);
  return std::stoi(log.substr(log.find("port=", pos) + 5));
}

std::string metric_line(int port, const std::string& name) {
  auto page = lt::http_get(port, "/metrics");
  auto pos = page.find("\n" + name + " ");
  return pos == std::string::npos ? "" : page.substr(pos + 1, page.find('\n', pos + 1) - pos - 1);
}

bool logged(const lt::child_process& p, const std::string& text) {
  return p.stderr_text().find(text) != std::string::npos;
}

/// Submits `name` until the answer is not `refused_code` (a guard of `tries`, not timing).
lt::run_result submit_until(const lt::live_service& s, const std::string& name, int tries,
                            const std::function<bool(const lt::run_result&)>& done) {
  lt::run_result r;
  for (int i = 0; i < tries; ++i) {
    r = s.admin({"submit", s.job_file(name + "-" + std::to_string(i), 1)});
    if (done(r))
      return r;
    std::this_thread::sleep_for(200ms);
  }
  return r;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_full_disk_makes_the_store_read_only_until_space_returns) {
  lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
  small_disk disk{s.dir / "db", 4 << 20};
  auto serve = s.serve();
  int port = metrics_port(*serve);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("before", 1)}).exit_code, 0);
  BOOST_CHECK_EQUAL(metric_line(port, "loom_store_writable"), "loom_store_writable 1");

  disk.fill();
  // Writes fit in the WAL's last page for a while; the first that needs a new one fails.
  auto refused = submit_until(s, "full", 200, [](auto& r) { return r.exit_code != 0; });
  BOOST_CHECK_EQUAL(refused.exit_code, 3);
  BOOST_CHECK_MESSAGE(refused.err.find("ERROR_READ_ONLY") != std::string::npos, refused.err);
  BOOST_CHECK(logged(*serve, "event=store_read_only"));
  BOOST_CHECK_EQUAL(metric_line(port, "loom_store_writable"), "loom_store_writable 0");
  auto again = s.admin({"submit", s.job_file("while-full", 1)});
  BOOST_CHECK_EQUAL(again.exit_code, 3);
  auto jobs = s.admin({"jobs"});
  BOOST_CHECK_EQUAL(jobs.exit_code, 0); // reads go on
  BOOST_CHECK(jobs.out.find("before") != std::string::npos);
  BOOST_CHECK(jobs.out.find("while-full") == std::string::npos);

  disk.free_space();
  auto placed = submit_until(s, "after", 150, [](auto& r) { return r.exit_code == 0; });
  BOOST_CHECK_EQUAL(placed.exit_code, 0);
  BOOST_CHECK(logged(*serve, "event=store_writable"));
  BOOST_CHECK_EQUAL(metric_line(port, "loom_store_writable"), "loom_store_writable 1");
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);

  // Started on a full disk: read-only, nothing lost, writable once space returns.
  disk.fill();
  auto second = s.serve();
  BOOST_CHECK(logged(*second, "event=store_read_only"));
  auto listed = s.admin({"jobs"});
  BOOST_CHECK(listed.out.find("before") != std::string::npos);
  BOOST_CHECK(listed.out.find("after") != std::string::npos);
  BOOST_CHECK_EQUAL(s.admin({"submit", s.job_file("late", 1)}).exit_code, 3);
  disk.free_space();
  auto late = submit_until(s, "late", 300, [](auto& r) { return r.exit_code == 0; });
  BOOST_CHECK_EQUAL(late.exit_code, 0);
  second->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(second->wait(lt::live_limit).value_or(-1), 0);
  BOOST_CHECK(!logged(*second, "Assertion"));
}

BOOST_AUTO_TEST_CASE(a_release_whose_progress_cannot_be_stored_is_answered_with_the_error) {
  lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
  small_disk disk{s.dir / "db", 4 << 20};
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-p", 100000)}).exit_code, 0);
  loom::client w{s.keys("driver-a")};
  BOOST_REQUIRE(w.register_worker("driver", "w-p", "job-p")->has_registered());
  disk.fill();
  // Each release writes the job's progress; the first write that needs a new WAL page fails.
  // Answered `ok`, that release would be an acknowledgement a restart could take back.
  const std::array<std::string, 3> phases{"rollout", "training", "sync"};
  std::optional<loom::call_error> refused;
  size_t at = 0; // the phase to run next
  for (int released = 0; released < 2000 && !refused; ++released, at = (at + 1) % 3) {
    auto g = w.acquire("job-p", phases[at], lt::live_limit);
    BOOST_REQUIRE_MESSAGE(g, phases[at] << ": " << g.error.message);
    refused = w.release("job-p", phases[at], 1.0);
  }
  BOOST_REQUIRE_MESSAGE(refused, "every release was answered ok on a full disk");
  BOOST_CHECK_EQUAL(refused->code, loom::v1::ERROR_READ_ONLY);
  BOOST_CHECK(lt::logs(*serve, "event=progress_unstored", lt::live_limit));
  // Space returns: the store is writable again and the job goes on from its next phase.
  disk.free_space();
  auto placed = submit_until(s, "after", 150, [](auto& r) { return r.exit_code == 0; });
  BOOST_REQUIRE_EQUAL(placed.exit_code, 0);
  auto g = w.acquire("job-p", phases[at], lt::live_limit);
  BOOST_REQUIRE_MESSAGE(g, g.error.message);
  auto again = w.release("job-p", phases[at], 1.0);
  BOOST_CHECK_MESSAGE(!again.has_value(), (again ? again->message : std::string{}));
  serve->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
}

BOOST_AUTO_TEST_CASE(a_store_removed_under_a_running_service_is_detected_and_takes_no_writes) {
  lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
  auto serve = s.serve();
  int port = metrics_port(*serve);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("before", 1)}).exit_code, 0);
  // Someone removes the store, and a directory of the same name comes back (the keys the
  // admin CLI reads, as a second service would make it): not the store this one opened.
  const std::filesystem::path db = s.dir / "db", keys = s.dir / "keys-copy";
  std::filesystem::copy(db / "keys", keys);
  std::filesystem::remove_all(db);
  std::filesystem::create_directories(db);
  std::filesystem::copy(keys, db / "keys");
  // The watch raises the alarm without waiting for a write.
  auto alarm = serve->read_until(
    true, [](auto& l) { return l.find("event=store_lost") != std::string::npos; },
    lt::live_limit);
  BOOST_REQUIRE_MESSAGE(alarm, serve->stderr_text());
  BOOST_CHECK_MESSAGE(alarm->find("removed or replaced") != std::string::npos, *alarm);
  BOOST_CHECK_EQUAL(metric_line(port, "loom_store_writable"), "loom_store_writable 0");
  // No write is acknowledged into the lost store, and none creates a new one there.
  auto refused = s.admin({"submit", s.job_file("after", 1)});
  BOOST_CHECK_EQUAL(refused.exit_code, 3);
  BOOST_CHECK_MESSAGE(refused.err.find("ERROR_READ_ONLY") != std::string::npos
                        && refused.err.find("removed or replaced") != std::string::npos,
                      refused.err);
  BOOST_CHECK(!std::filesystem::exists(db / "CURRENT"));
  auto jobs = s.admin({"jobs"});
  BOOST_CHECK_EQUAL(jobs.exit_code, 0); // what it knows, it still answers
  BOOST_CHECK(jobs.out.find("before") != std::string::npos);
  BOOST_CHECK(jobs.out.find("after") == std::string::npos);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
  BOOST_CHECK(!std::filesystem::exists(db / "CURRENT"));
}

BOOST_AUTO_TEST_CASE(a_read_only_mount_starts_the_store_read_only_until_it_is_writable) {
  lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
  small_disk disk{s.dir / "db", 64 << 20};
  {
    auto serve = s.serve();
    BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("before", 1)}).exit_code, 0);
    serve->send_signal(SIGTERM);
    BOOST_REQUIRE_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
  }
  disk.remount(true);
  auto serve = s.serve();
  BOOST_CHECK(logged(*serve, "event=store_read_only"));
  BOOST_CHECK(!logged(*serve, "in use by another process")); // once misread as a held lock
  BOOST_CHECK(s.admin({"jobs"}).out.find("before") != std::string::npos);
  BOOST_CHECK_EQUAL(s.admin({"submit", s.job_file("while-read-only", 1)}).exit_code, 3);
  disk.remount(false);
  auto placed = submit_until(s, "after", 300, [](auto& r) { return r.exit_code == 0; });
  BOOST_CHECK_EQUAL(placed.exit_code, 0);
  BOOST_CHECK(logged(*serve, "event=store_writable"));
  serve->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
}

namespace {

std::string only_wal(const std::string& db) {
  for (auto& e : std::filesystem::directory_iterator(db))
    if (e.path().extension() == ".log")
      return e.path().string();
  BOOST_FAIL("no WAL in " << db);
  return {};
}

int listed_jobs(const lt::live_service& s) {
  auto jobs = s.admin({"jobs"}).out;
  int n = 0;
  for (size_t pos = 0; (pos = jobs.find("\nacked-", pos)) != std::string::npos; ++pos)
    ++n;
  return n;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_damaged_wal_is_refused_and_salvaged_only_when_asked) {
  lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
  {
    auto serve = s.serve();
    for (int i = 0; i < 40; ++i)
      BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("acked-" + std::to_string(i), 1)})
                            .exit_code % 3, 0); // placed, or rejected once the cluster is full
    serve->send_signal(SIGKILL); // every answer was synced first; the WAL holds them all
    serve->wait(lt::live_limit);
  }
  auto wal = only_wal(s.dir / "db");
  auto size = std::filesystem::file_size(wal);
  {
    std::fstream f{wal, std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(std::streamoff(size / 2));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
  }
  auto refused = lt::run({lt::loom_binary(), "serve", "-c", s.config});
  BOOST_CHECK_EQUAL(refused.exit_code, 1);
  BOOST_CHECK_MESSAGE(refused.err.find("--salvage") != std::string::npos, refused.err);
  BOOST_CHECK(refused.err.find("nothing was dropped") != std::string::npos);
  BOOST_CHECK(refused.err.find("Assertion") == std::string::npos);

  lt::child_process salvaged{{lt::loom_binary(), "serve", "-c", s.config, "--salvage"}};
  BOOST_REQUIRE(salvaged.read_until(
    true, [](const std::string& l) { return l.find("event=serve_ready") != l.npos; },
    lt::live_limit));
  BOOST_CHECK(salvaged.stderr_text().find("recovery=salvage") != std::string::npos);
  auto kept = listed_jobs(s);
  BOOST_CHECK_GT(kept, 0);  // what came before the damage
  BOOST_CHECK_LT(kept, 40); // and nothing after it
  salvaged.send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(salvaged.wait(lt::live_limit).value_or(-1), 0);
  // Salvaged once, the log is whole again: a plain start opens it.
  auto plain = s.serve();
  BOOST_CHECK_EQUAL(listed_jobs(s), kept);
  plain->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(plain->wait(lt::live_limit).value_or(-1), 0);
}

namespace {

enum class wal_loss { truncated, deleted };

/// 40 submissions answered, SIGKILL, then the live WAL loses its second half or all of it.
void lose_live_wal(lt::live_service& s, wal_loss loss) {
  {
    auto serve = s.serve();
    for (int i = 0; i < 40; ++i)
      BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("acked-" + std::to_string(i), 1)})
                            .exit_code % 3, 0);
    serve->send_signal(SIGKILL);
    serve->wait(lt::live_limit);
  }
  auto wal = only_wal(s.dir / "db");
  if (loss == wal_loss::deleted)
    std::filesystem::remove(wal);
  else
    std::filesystem::resize_file(wal, std::filesystem::file_size(wal) / 2);
}

} // namespace

// RocksDB 7.8 tracks only closed WALs: without Loom's acknowledged mark both open silently.
BOOST_AUTO_TEST_CASE(a_truncated_or_deleted_live_wal_is_refused_not_opened_short) {
  for (auto loss : {wal_loss::truncated, wal_loss::deleted}) {
    BOOST_TEST_CONTEXT((loss == wal_loss::deleted ? "deleted" : "truncated")) {
      lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
      lose_live_wal(s, loss);
      auto refused = lt::run({lt::loom_binary(), "serve", "-c", s.config});
      BOOST_CHECK_EQUAL(refused.exit_code, 1);
      BOOST_CHECK_MESSAGE(refused.err.find("truncated or deleted") != std::string::npos,
                          refused.err);
      BOOST_CHECK(refused.err.find("--salvage") != std::string::npos);

      lt::child_process salvaged{{lt::loom_binary(), "serve", "-c", s.config, "--salvage"}};
      BOOST_REQUIRE(salvaged.read_until(
        true, [](const std::string& l) { return l.find("event=serve_ready") != l.npos; },
        lt::live_limit));
      auto kept = listed_jobs(s);
      BOOST_CHECK_LT(kept, 40);
      salvaged.send_signal(SIGTERM);
      BOOST_CHECK_EQUAL(salvaged.wait(lt::live_limit).value_or(-1), 0);
      auto plain = s.serve(); // the salvage accepted the loss once
      BOOST_CHECK_EQUAL(listed_jobs(s), kept);
      plain->send_signal(SIGTERM);
      BOOST_CHECK_EQUAL(plain->wait(lt::live_limit).value_or(-1), 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_lost_keys_directory_is_refused_not_replaced) {
  lt::live_service s{{.fabric = false}};
  {
    auto serve = s.serve();
    BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("kept", 1)}).exit_code, 0);
    serve->send_signal(SIGTERM);
    BOOST_REQUIRE_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
  }
  auto server_pub = lt::read_file(s.dir / "db/keys/server.pub");
  std::filesystem::remove_all(s.dir / "db/keys");
  auto refused = lt::run({lt::loom_binary(), "serve", "-c", s.config});
  BOOST_CHECK_EQUAL(refused.exit_code, 1);
  BOOST_CHECK_MESSAGE(refused.err.find("server.secret is missing") != std::string::npos,
                      refused.err);
  BOOST_CHECK(!std::filesystem::exists(s.dir / "db/keys/server.pub"));
  lt::child_process rotated{{lt::loom_binary(), "serve", "-c", s.config, "--new-keys"}};
  BOOST_REQUIRE(rotated.read_until(
    true, [](const std::string& l) { return l.find("event=serve_ready") != l.npos; },
    lt::live_limit));
  BOOST_CHECK_NE(lt::read_file(s.dir / "db/keys/server.pub"), server_pub);
  rotated.send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(rotated.wait(lt::live_limit).value_or(-1), 0);
}

namespace {

/// The embedded config with `from` replaced by `to` (the first occurrence).
std::string broken_config(const lt::temp_dir& dir, const std::string& from,
                          const std::string& to) {
  auto text = lt::read_file(lt::source_path("conf/loom.toml"));
  auto pos = text.find(from);
  BOOST_REQUIRE_MESSAGE(pos != std::string::npos, from);
  text.replace(pos, from.size(), to);
  auto path = dir / "broken.toml";
  lt::write_file(path, text);
  return path;
}

} // namespace

BOOST_AUTO_TEST_CASE(settings_that_would_wrap_or_fail_serve_exit_2_naming_the_key) {
  lt::temp_dir dir;
  lt::write_file(dir / "garbage.pub", "not a key\n");
  struct broken {
    std::string from, to, key;
  };
  const std::vector<broken> cases{
    {"heartbeat_ms = 2000", "heartbeat_ms = 4294967296", "security.heartbeat_ms"},
    {"heartbeat_misses = 3", "heartbeat_misses = 4294967296", "security.heartbeat_misses"},
    {"heartbeat_ms = 2000", "heartbeat_ms = 0", "security.heartbeat_ms"},
    // A switch of 10^8 ports took serve to 4.6 GB before its fabric controller died.
    {"ports = 32", "ports = 100000000", "fabric.ocs[0].ports"},
    {"ports = 16", "ports = 100000000", "fabric.tors[0].ports"},
    {"link_gbps = 400", "link_gbps = inf", "fabric.link_gbps"},
    {"link_gbps = 400", "link_gbps = nan", "fabric.link_gbps"},
    {"metrics = \"127.0.0.1:9464\"", "metrics = \"127.0.0.1:5555\"", "endpoints.metrics"},
    {"driver = []", "driver = [\"" + (dir / "garbage.pub") + "\"]", "security.clients.driver"},
    {"driver = []", "driver = [\"" + (dir / "none.pub") + "\"]", "security.clients.driver"},
  };
  for (auto& c : cases) {
    auto path = broken_config(dir, c.from, c.to);
    auto r = lt::run({lt::loom_binary(), "check-config", path});
    BOOST_CHECK_MESSAGE(r.exit_code == 2, c.to << ": exit " << r.exit_code);
    BOOST_CHECK_MESSAGE(r.err.find(path + ":") != std::string::npos
                          && r.err.find(": " + c.key + ": ") != std::string::npos,
                        c.to << ":\n" << r.err);
  }
  // Only regular files are read: a device never ends, a FIFO never opens.
  BOOST_REQUIRE_EQUAL(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  for (auto path : {std::string{"/dev/zero"}, dir / "fifo"}) {
    auto r = lt::run({lt::loom_binary(), "check-config", path}, 30s);
    BOOST_CHECK_EQUAL(r.exit_code, 2);
    BOOST_CHECK_MESSAGE(r.err.find("not a regular file") != std::string::npos, r.err);
  }
  // Every command-line usage error is 2.
  for (auto args : std::vector<std::vector<std::string>>{
         {"serve", "-c", dir / "missing.toml"}, {"serve", "--no-such-flag"}, {"submit"},
         {"ocs-emu", "--login-timeout-ms", "0"}}) {
    args.insert(args.begin(), lt::loom_binary());
    BOOST_CHECK_MESSAGE(lt::run(args).exit_code == 2, args[1] << " " << args[2]);
  }
}

namespace {

/// A TCP connection to the emulator; reads until the peer closes or `limit` passes.
bool closed_by_peer(boost::asio::ip::tcp::socket& s, std::chrono::milliseconds limit) {
  ::timeval tv{long(limit.count() / 1000), long(limit.count() % 1000) * 1000};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  for (;;) {
    auto n = ::recv(s.native_handle(), buf, sizeof buf, 0);
    if (n == 0)
      return true;
    if (n < 0)
      return false;
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(ocs_emu_closes_sessions_that_never_log_in_and_survives_failed_accepts) {
  // Few file descriptors: connections beyond them fail to be accepted (EMFILE).
  lt::child_process emu{{"/bin/sh", "-c",
                         "ulimit -n 24 && exec \"$0\" ocs-emu --port 0 --login-timeout-ms 300",
                         lt::loom_binary()}};
  int port = 0;
  BOOST_REQUIRE(emu.read_until(
    true,
    [&](const std::string& l) {
      auto pos = l.find("event=ocs_emu_listening");
      if (pos != std::string::npos)
        port = std::stoi(l.substr(l.find("port=", pos) + 5));
      return pos != std::string::npos;
    },
    lt::live_limit));
  boost::asio::io_context io;
  auto connect = [&] {
    boost::asio::ip::tcp::socket s{io};
    s.connect({boost::asio::ip::make_address("127.0.0.1"), uint16_t(port)});
    return s;
  };
  {
    std::vector<boost::asio::ip::tcp::socket> flood;
    for (int i = 0; i < 40; ++i)
      flood.push_back(connect());
    BOOST_CHECK(emu.read_until(
      true, [](const std::string& l) { return l.find("event=ocs_emu_accept_failed") != l.npos; },
      lt::live_limit));
    // Silent sessions are closed at the login timeout, which frees descriptors for the rest.
    BOOST_CHECK(closed_by_peer(flood.front(), 30s));
  }
  auto late = connect();
  boost::asio::write(late, boost::asio::buffer(std::string{"RTRV-HDR:::1;"}));
  std::string answer(64, '\0');
  auto n = late.read_some(boost::asio::buffer(answer));
  BOOST_CHECK_MESSAGE(std::string(answer, 0, n).find("1") != std::string::npos, answer);
  BOOST_CHECK(closed_by_peer(late, 30s));
  emu.send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(emu.wait(lt::live_limit).value_or(-1), 0);
}

BOOST_AUTO_TEST_CASE(oversized_fields_get_a_typed_error_and_the_service_keeps_serving) {
  lt::live_service s{{.fabric = false}};
  auto serve = s.serve();
  loom::client admin{s.keys("admin")};
  loom::v1::Envelope inspect;
  inspect.mutable_inspect_job()->set_job(std::string(1000, 'j'));
  auto big_id = admin.call(inspect);
  BOOST_REQUIRE(big_id && big_id->has_error());
  BOOST_CHECK_EQUAL(big_id->error().code(), loom::v1::ERROR_TOO_LARGE);
  BOOST_CHECK_MESSAGE(big_id->error().message().find("inspect_job.job is 1000 bytes")
                        != std::string::npos,
                      big_id->error().message());
  loom::v1::Envelope submit;
  submit.mutable_submit_job()->set_spec_toml(std::string(2 << 20, '#'));
  auto big_spec = admin.call(submit);
  BOOST_REQUIRE(big_spec && big_spec->has_error());
  BOOST_CHECK_EQUAL(big_spec->error().code(), loom::v1::ERROR_TOO_LARGE);
  // A frame over the socket's limit drops that connection, not the service.
  {
    loom::client huge{s.keys("admin")};
    submit.mutable_submit_job()->set_spec_toml(std::string(20 << 20, '#'));
    BOOST_CHECK(!huge.call(submit, std::chrono::milliseconds{2000}));
  }
  BOOST_CHECK_EQUAL(s.admin({"submit", s.job_file("still-served", 1)}).exit_code, 0);
  serve->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
}

namespace {

struct flooded {
  int answered = 0;
  int limited = 0; // answered RATE_LIMITED
};

/// Sends `e` `n` times at once from `c` and waits for every answer (checked by the caller, on
/// the test's thread).
flooded flood(loom::client& c, const loom::v1::Envelope& e, int n) {
  std::atomic<int> answered = 0, limited = 0;
  for (int i = 0; i < n; ++i)
    c.call_async(e, [&](std::optional<loom::v1::Envelope> r) {
      limited += r && r->has_error() && r->error().code() == loom::v1::ERROR_RATE_LIMITED;
      ++answered;
    });
  for (auto until = std::chrono::steady_clock::now() + lt::live_limit;
       answered < n && std::chrono::steady_clock::now() < until;)
    std::this_thread::sleep_for(10ms);
  return {answered.load(), limited.load()};
}

} // namespace

// The engines of a deployment share one key: each session has its own frame budget, so that
// together they may send what one alone may not; one session past its own is still refused.
BOOST_AUTO_TEST_CASE(sessions_sharing_a_key_each_have_their_own_frame_budget) {
  lt::live_service s{{.fabric = false,
                      .security = "frames_per_s_per_key = 100\nframes_per_s_per_session = 100\n"}};
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-x", 1)}).exit_code, 0);
  std::vector<std::unique_ptr<loom::client>> sessions;
  for (const char* id : {"d-1", "d-2"}) {
    sessions.push_back(std::make_unique<loom::client>(s.keys("driver-a")));
    auto r = sessions.back()->register_worker("driver", id, "job-x");
    BOOST_REQUIRE(r);
    BOOST_REQUIRE_MESSAGE(r->has_registered(), r->DebugString());
  }
  // Frames from both, at once: 2 x 150, past the key's burst of 200, within each session's.
  loom::v1::Envelope staged;
  staged.mutable_staged()->set_job("nobody"); // not its job: answered at once
  flooded first;
  std::thread other([&] { first = flood(*sessions[0], staged, 150); });
  const auto second = flood(*sessions[1], staged, 150);
  other.join();
  BOOST_CHECK_EQUAL(first.answered + second.answered, 300);
  BOOST_CHECK_EQUAL(first.limited + second.limited, 0);
  // One session alone past its own budget is refused.
  const auto alone = flood(*sessions[0], staged, 400);
  BOOST_CHECK_EQUAL(alone.answered, 400);
  BOOST_CHECK_GE(alone.limited, 100);
  serve->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
}

BOOST_AUTO_TEST_CASE(a_key_over_its_limits_is_refused_and_other_keys_keep_their_service) {
  lt::live_service s{{.fabric = false,
                      .security = "frames_per_s_per_key = 100\nsessions_per_key = 3\n"}};
  auto serve = s.serve();
  // A flood from one key: every request answered, those past the burst RATE_LIMITED.
  loom::client flooder{s.keys("driver-a")};
  loom::v1::Envelope acquire;
  acquire.mutable_phase_acquire()->set_job("nobody");
  const auto got = flood(flooder, acquire, 600);
  BOOST_CHECK_EQUAL(got.answered, 600);
  BOOST_CHECK_GE(got.limited, 100); // 200 of burst, then 100/s
  BOOST_CHECK_EQUAL(s.admin({"jobs"}).exit_code, 0); // another key is served meanwhile
  auto counted = metric_line(metrics_port(*serve), "loom_gateway_limited_total{limit=\"rate\"}");
  BOOST_REQUIRE_MESSAGE(!counted.empty(), "no rate-limited counter");
  BOOST_CHECK_GE(std::stod(counted.substr(counted.rfind(' ') + 1)), double(got.limited));

  // Sessions: three per key; a goodbye frees one. A goodbye's reason is logged on one line, cut.
  std::vector<std::unique_ptr<loom::client>> shims;
  auto register_shim = [&](int i) {
    shims.push_back(std::make_unique<loom::client>(s.keys("shim")));
    auto r = shims.back()->register_worker("collective-shim", "shim-" + std::to_string(i), "job-x");
    BOOST_REQUIRE(r);
    return *r;
  };
  for (int i = 0; i < 3; ++i)
    BOOST_CHECK(register_shim(i).has_registered());
  auto fourth = register_shim(3);
  BOOST_REQUIRE(fourth.has_error());
  BOOST_CHECK_EQUAL(fourth.error().code(), loom::v1::ERROR_RATE_LIMITED);
  BOOST_CHECK_MESSAGE(fourth.error().message().find("3 live sessions") != std::string::npos,
                      fourth.error().message());
  shims[0]->goodbye("line one\nline two " + std::string(5000, 'r'), false);
  std::this_thread::sleep_for(300ms);
  BOOST_CHECK(register_shim(4).has_registered());
  serve->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
  auto log = serve->stderr_text();
  auto bye = log.find("event=worker_goodbye worker=shim-0");
  BOOST_REQUIRE(bye != std::string::npos);
  auto line = log.substr(bye, log.find('\n', bye) - bye);
  BOOST_CHECK(line.find("line one\\x0aline two") != std::string::npos);
  BOOST_CHECK(line.find("truncated_bytes=") != std::string::npos);
  BOOST_CHECK_LT(line.size(), 2200u);
}

namespace {

/// Every job the service lists, with its state, a page at a time.
std::map<std::string, std::string> listed_states(const lt::live_service& s) {
  loom::client admin{s.keys("admin")};
  loom::v1::Envelope list;
  list.mutable_list_jobs()->set_limit(500);
  std::map<std::string, std::string> out;
  for (;;) {
    auto reply = admin.call(list, lt::live_limit);
    BOOST_REQUIRE(reply && reply->has_job_list());
    for (auto& j : reply->job_list().jobs())
      out[j.job()] = j.state();
    if (reply->job_list().next_after().empty())
      return out;
    list.mutable_list_jobs()->set_after(reply->job_list().next_after());
  }
}

} // namespace

// 100 SIGKILLs at seeded random moments while an admin client submits: every submission the
// service answered (placed or rejected) is there after each restart, in the state it was given.
// 25 in a sanitized build (lt::sanitized): each restart's recovery runs the same code.
BOOST_AUTO_TEST_CASE(a_hundred_sigkills_lose_no_answered_decision) {
  const int kills = lt::sanitized ? 25 : 100;
  lt::live_service s{{.rollout_nodes = 4, .training_nodes = 4, .fabric = false}};
  std::map<std::string, std::string> answered; // job -> state its answer gave
  std::mt19937 rng{22};
  int next = 0;
  size_t checked = 0;
  for (int kill = 0; kill < kills; ++kill) {
    auto serve = s.serve();
    auto listed = listed_states(s);
    for (auto& [job, state] : answered) {
      BOOST_REQUIRE_MESSAGE(listed.count(job), job << " was answered, then lost at kill " << kill);
      BOOST_CHECK_EQUAL(listed[job], state);
    }
    checked += answered.size();
    std::atomic<bool> stop = false;
    std::thread submitter([&] {
      loom::client admin{s.keys("admin")};
      while (!stop) {
        auto job = "kill-" + std::to_string(next++);
        loom::v1::Envelope submit;
        submit.mutable_submit_job()->set_spec_toml(lt::read_file(s.job_file(job, 1)));
        auto reply = admin.call(submit, std::chrono::milliseconds{500});
        if (reply && reply->has_submit_reply())
          answered[job] = reply->submit_reply().placement() == loom::v1::PLACEMENT_KIND_REJECTED
                            ? "rejected"
                            : "placed";
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds{rng() % 150});
    serve->send_signal(SIGKILL);
    serve->wait(lt::live_limit);
    stop = true;
    submitter.join();
  }
  BOOST_TEST_MESSAGE(answered.size() << " answered submissions, " << checked
                                     << " checks after restarts");
  BOOST_CHECK_GT(answered.size(), size_t(kills));
}
