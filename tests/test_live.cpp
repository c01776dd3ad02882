// The live service under what operators and frameworks do to it: SIGKILLs at random moments
// during a stream of submissions and running workers, SIGTERM under load, and the Python
// package installed the way a framework image installs it, its Job API driving a job.

#define BOOST_TEST_MODULE live
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "loom.pb.h"
#include "loom/client.hpp"
#include "tests/support/live_service.hpp"

using namespace loom;
namespace lt = loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

/// What the service acknowledged for a submission: the decision and the group.
struct acknowledged {
  std::string state; // placed | rejected
  std::string group;
};

/// Submits job after job on one admin connection; records every acknowledged answer. A
/// submission the service did not answer (it was killed) is retried under a new name.
class submitter {
public:
  submitter(const lt::live_service& s) : service_(s) {
    thread_ = std::thread([this] { run(); });
  }
  ~submitter() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable())
      thread_.join();
  }

  std::map<std::string, acknowledged> answers() {
    std::lock_guard<std::mutex> lock{mutex_};
    return answers_;
  }

private:
  void run() {
    for (int n = 0; !stop_; ++n) {
      auto o = service_.keys("admin");
      o.timeout = 2s;
      client admin{o};
      v1::Envelope e;
      auto name = "s" + std::to_string(n);
      std::ifstream in(service_.job_file(name));
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      e.mutable_submit_job()->set_spec_toml(text);
      auto r = admin.call(e);
      if (r && r->has_submit_reply()) {
        auto& reply = r->submit_reply();
        std::lock_guard<std::mutex> lock{mutex_};
        answers_[name] = {reply.group().empty() ? "rejected" : "placed", reply.group()};
      }
      std::this_thread::sleep_for(50ms);
    }
  }

  const lt::live_service& service_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<std::string, acknowledged> answers_;
  std::thread thread_;
};

json jobs_of(const lt::live_service& s) {
  auto r = s.admin({"jobs", "--json"});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out);
}

} // namespace

BOOST_AUTO_TEST_CASE(thirty_sigkills_change_no_acknowledged_decision) {
  lt::live_service s{{.rollout_nodes = 8, .training_nodes = 8, .fabric = false}};
  auto serve = s.serve();
  // Two jobs with workers running through every kill.
  std::vector<std::unique_ptr<lt::child_process>> workers;
  for (auto job : {"w0", "w1"}) {
    BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file(job)}).exit_code, 0);
    workers.push_back(s.cpp_worker(std::string{"driver-"} + (job[1] == '0' ? "a" : "b"), job,
                                   "driver", 100000, 20));
  }
  submitter stream{s};
  std::mt19937_64 rng{15};
  std::uniform_int_distribution<int> pause_ms{100, 700};
  for (int kill = 0; kill < 30; ++kill) {
    std::this_thread::sleep_for(std::chrono::milliseconds{pause_ms(rng)});
    for (auto& w : workers) // read their output as it comes, so that they never block on it
      w->read_until(false, [](const std::string&) { return false; }, 5ms);
    serve->send_signal(SIGKILL);
    BOOST_REQUIRE(serve->wait(lt::live_limit));
    serve = s.serve();
  }
  std::this_thread::sleep_for(500ms);
  stream.stop();
  auto answers = stream.answers();
  BOOST_TEST_MESSAGE(answers.size() << " acknowledged submissions across 30 SIGKILLs");
  BOOST_REQUIRE_GE(answers.size(), 30u);
  std::map<std::string, acknowledged> now;
  for (auto& j : jobs_of(s))
    now[j["job"]] = {j["state"], j["group"]};
  int changed = 0;
  for (auto& [job, a] : answers) {
    auto it = now.find(job);
    bool same = it != now.end() && it->second.state == a.state && it->second.group == a.group;
    changed += !same;
    BOOST_CHECK_MESSAGE(same, job << " was acknowledged " << a.state << " " << a.group
                                  << ", is now "
                                  << (it == now.end() ? "missing" : it->second.state + " "
                                                                      + it->second.group));
  }
  BOOST_TEST_MESSAGE(changed << " acknowledged jobs changed state or group");
  // The workers ran on through every restart, resuming their jobs each time.
  for (auto& j : jobs_of(s))
    if (j["job"] == "w0" || j["job"] == "w1") {
      BOOST_CHECK_EQUAL(j["state"], "placed");
      BOOST_CHECK_GT(j["iterations_done"].get<int>(), 0);
    }
  for (auto& w : workers) {
    w->read_until(false, [](const std::string&) { return false; }, 5ms);
    BOOST_CHECK_GT(lt::count_lines(*w, "grant "), 0);
    w->send_signal(SIGKILL);
  }
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(sigterm_under_load_stops_and_workers_move_to_the_next_service) {
  lt::live_service s{{.rollout_nodes = 4, .training_nodes = 4}};
  auto serve = s.serve();
  std::vector<std::unique_ptr<lt::child_process>> workers;
  for (int i = 0; i < 6; ++i) {
    auto job = "busy-" + std::to_string(i);
    BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file(job, 40)}).exit_code, 0);
    workers.push_back(s.cpp_worker(i % 2 ? "driver-a" : "driver-b", job, "driver", 40, 20));
  }
  for (auto& w : workers)
    BOOST_REQUIRE(w->read_until(
      false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, lt::live_limit));
  auto t0 = std::chrono::steady_clock::now();
  serve->send_signal(SIGTERM);
  auto code = serve->wait(lt::live_limit);
  auto stop_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - t0)
                   .count();
  BOOST_REQUIRE(code);
  BOOST_CHECK_EQUAL(*code, 0);
  BOOST_TEST_MESSAGE("SIGTERM with 6 running jobs in their groups: stopped in " << stop_ms
                                                                                << " ms");
  // The next service resumes every job; each worker finishes its iterations.
  serve = s.serve();
  for (auto& w : workers)
    BOOST_REQUIRE_MESSAGE(lt::finished(*w), w->stderr_text());
  for (auto& w : workers)
    BOOST_CHECK_MESSAGE(w->wait(lt::live_limit).value_or(-1) == 0, w->stderr_text());
  auto jobs = jobs_of(s);
  for (auto& j : jobs)
    BOOST_CHECK_EQUAL(j["state"], "finished");
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(the_python_package_installs_offline_and_its_job_api_drives_a_job) {
  lt::live_service s;
  auto serve = s.serve();
  // A virtual environment that sees Debian's python3-zmq and python3-protobuf, and the package
  // installed into it from a copy of python/ (pip builds in place), without any index.
  namespace fs = std::filesystem;
  fs::copy(lt::source_path("python"), s.dir / "src", fs::copy_options::recursive);
  auto venv = s.dir / "venv";
  auto made = lt::run({"/usr/bin/python3", "-m", "venv", "--system-site-packages", venv});
  BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  auto pip = lt::run({venv + "/bin/pip", "install", "--no-index", "--no-build-isolation",
                      s.dir / "src"},
                     120s);
  BOOST_REQUIRE_MESSAGE(pip.exit_code == 0, pip.out << pip.err);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("py-loop", 3)}).exit_code, 0);
  // The veRL/slime-shaped loop, configured from the environment only.
  lt::child_process loop{{"/usr/bin/env", "LOOM_ENDPOINT=" + s.endpoint(),
                          "LOOM_SERVER_KEY=" + s.dir / "db/keys/server.pub",
                          "LOOM_KEY=" + s.dir / "keys/driver-a", "LOOM_JOB=py-loop",
                          venv + "/bin/python", lt::source_path("python/examples/rl_loop.py"),
                          "--steps", "3"}};
  BOOST_REQUIRE(loop.read_until(
    false, [](const std::string& l) { return l.rfind("done", 0) == 0; }, lt::live_limit));
  BOOST_CHECK_EQUAL(lt::count_lines(loop, "loom on job py-loop"), 1);
  BOOST_CHECK_EQUAL(lt::count_lines(loop, "step "), 3);
  BOOST_CHECK_EQUAL(lt::count_lines(loop, "step 0 gpus 8"), 1);
  BOOST_CHECK(s.admin({"jobs"}).out.find("py-loop  finished") != std::string::npos);
  // Without LOOM_ENDPOINT the same program runs on its own: every Loom call is a no-op.
  auto alone = lt::run({"/usr/bin/env", "-u", "LOOM_ENDPOINT", venv + "/bin/python",
                        lt::source_path("python/examples/rl_loop.py"), "--steps", "2"});
  BOOST_CHECK_EQUAL(alone.exit_code, 0);
  BOOST_CHECK(alone.out.find("loom off") != std::string::npos);
  BOOST_CHECK(alone.out.find("done 2 steps") != std::string::npos);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}
