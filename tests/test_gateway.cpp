// The live service through its gateway, with real `loom serve`, real ZeroMQ/CURVE and real
// worker processes (the C++ and Python examples): jobs attached right after submission,
// every role pairing, failures, restarts, and every refusal a session can meet.

#define BOOST_TEST_MODULE gateway
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <functional>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "loom.pb.h"
#include "loom/client.hpp"
#include "tests/support/live_service.hpp"

using namespace loom;
namespace lt = loom::test;
using namespace std::chrono_literals;

namespace {

/// The job of each rollout grant the service logged, in order.
std::vector<std::string> rollout_grants(const std::vector<std::string>& log) {
  std::vector<std::string> out;
  for (auto& l : log)
    if (l.find("event=phase_granted") != std::string::npos
        && l.find("phase=rollout") != std::string::npos) {
      auto pos = l.find("job=") + 4;
      out.push_back(l.substr(pos, l.find(' ', pos) - pos));
    }
  return out;
}

bool logged(lt::child_process& serve, const std::string& text) {
  return lt::logs(serve, text, lt::live_limit);
}

/// The service's last 40 lines: what a failed check on its log saw.
std::string tail_of(lt::child_process& serve) {
  auto lines = serve.stderr_lines();
  std::string out;
  for (auto i = lines.size() > 40 ? lines.size() - 40 : 0; i < lines.size(); ++i)
    out += lines[i] + "\n";
  return out;
}

v1::Envelope acquire_of(const std::string& job, v1::Phase phase) {
  v1::Envelope e;
  e.mutable_phase_acquire()->set_job(job);
  e.mutable_phase_acquire()->set_phase(phase);
  return e;
}

v1::Envelope release_of(const std::string& job, v1::Phase phase) {
  v1::Envelope e;
  e.mutable_phase_release()->set_job(job);
  e.mutable_phase_release()->set_phase(phase);
  e.mutable_phase_release()->set_solo_s(0.1);
  return e;
}

int error_code(const std::optional<v1::Envelope>& r) {
  return r && r->has_error() ? int(r->error().code()) : -1;
}

/// Waits (a guard of live_limit, not a timing) until serve's /metrics page `shows` what the
/// test expects, and checks that it did, with the page as the message if not.
void check_metrics_show(const lt::child_process& serve,
                        const std::function<bool(const std::string&)>& shows) {
  auto log = serve.stderr_text();
  auto at = log.find("port=", log.find("event=metrics_listening"));
  const int port = std::stoi(log.substr(at + 5));
  auto page = lt::http_get(port, "/metrics");
  for (auto until = std::chrono::steady_clock::now() + lt::live_limit;
       !shows(page) && std::chrono::steady_clock::now() < until;
       page = lt::http_get(port, "/metrics"))
    std::this_thread::sleep_for(200ms);
  BOOST_CHECK_MESSAGE(shows(page), page);
}

} // namespace

BOOST_AUTO_TEST_CASE(jobs_attached_at_once_share_a_group_and_survive_failure_and_restart) {
  lt::live_service s{{.iterations = 3}}; // the default 60 s cold start is not waited out
  auto serve = s.serve();
  auto a = s.admin({"submit", s.job_file("job-a")});
  auto b = s.admin({"submit", s.job_file("job-b")});
  BOOST_REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  BOOST_CHECK(a.out.find("new_group in group g1") != std::string::npos);
  BOOST_CHECK(b.out.find("direct_packing in group g1") != std::string::npos);
  BOOST_CHECK(b.out.find("group $57.04/h") != std::string::npos); // the group's own cost
  // The Python worker starts first and has its first grant before the C++ one starts: the
  // slower start must not let either run its whole job alone.
  auto wb = s.python_example("rollout_worker.py", "driver-b",
                             {"--job", "job-b", "--role", "driver", "--iterations", "3",
                              "--phase-ms", "100"});
  BOOST_REQUIRE(wb->read_until(
    false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, lt::live_limit));
  auto wa = s.cpp_worker("driver-a", "job-a", "driver", 3, 100);
  BOOST_REQUIRE_MESSAGE(lt::finished(*wa), "C++ worker:\n" << wa->stderr_text());
  BOOST_REQUIRE_MESSAGE(lt::finished(*wb), "Python worker:\n" << wb->stderr_text());
  BOOST_CHECK_EQUAL(lt::count_lines(*wa, "grant "), 9); // 3 iterations x 3 phases
  BOOST_CHECK_EQUAL(lt::count_lines(*wb, "grant "), 9);
  // Round robin (WEAVE §4.3): while both run, the shared rollout pool alternates between them.
  serve->read_until(true, [](const std::string&) { return false; }, 300ms);
  auto order = rollout_grants(serve->stderr_lines());
  auto first_a = std::find(order.begin(), order.end(), "job-a");
  auto last_b = std::find(order.rbegin(), order.rend(), "job-b").base();
  BOOST_REQUIRE(first_a != order.end());
  BOOST_REQUIRE_GE(last_b - first_a, 2);
  for (auto it = first_a + 1; it < last_b; ++it)
    BOOST_CHECK_MESSAGE(*it != *(it - 1), "rollout grants repeat " << *it);
  BOOST_CHECK(s.admin({"jobs"}).out.find("job-a  finished") != std::string::npos);

  // Kill job-c's worker mid-run: after the heartbeat timeout job-c fails alone and job-d goes
  // on (WEAVE §5.3).
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-c", 0)}).exit_code, 0);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-d", 5)}).exit_code, 0);
  auto doomed = s.cpp_worker("driver-a", "job-c", "driver", 1000, 100);
  auto survivor = s.python_example("rollout_worker.py", "driver-b",
                                   {"--job", "job-d", "--role", "driver", "--iterations", "5",
                                    "--phase-ms", "100"});
  BOOST_REQUIRE(doomed->read_until(
    false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, lt::live_limit));
  doomed->send_signal(SIGKILL);
  BOOST_REQUIRE(logged(*serve, "event=job_failed job=job-c"));
  BOOST_REQUIRE_MESSAGE(lt::finished(*survivor), "job-d's worker:\n" << survivor->stderr_text());
  auto job_c = s.admin({"job", "job-c", "--json"});
  BOOST_CHECK(job_c.out.find("\"state\": \"failed\"") != std::string::npos);
  BOOST_CHECK(job_c.out.find("stopped sending heartbeats") != std::string::npos);

  // Restart the service under a running worker: it is told the service is stopping, registers
  // with the next one, which resumes job-e where it was (no second staging), and finishes.
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-e", 4)}).exit_code, 0);
  auto across = s.python_example("rollout_worker.py", "driver-b",
                                 {"--job", "job-e", "--role", "driver", "--iterations", "4",
                                  "--phase-ms", "300"});
  BOOST_REQUIRE(across->read_until(
    false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, lt::live_limit));
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  BOOST_CHECK_MESSAGE(logged(*serve, "event=gateway_stopping sessions=1"),
                      "serve's last lines:\n" << tail_of(*serve));
  serve = s.serve();
  BOOST_REQUIRE_MESSAGE(lt::finished(*across), "worker across the restart:\n"
                                                 << across->stderr_text());
  auto after = s.admin({"jobs"});
  BOOST_CHECK(after.out.find("job-e  finished") != std::string::npos);
  BOOST_CHECK(after.out.find("job-c  failed") != std::string::npos);
  BOOST_CHECK(after.out.find("job-a  finished") != std::string::npos);
  BOOST_CHECK(logged(*serve, "event=scheduler_restored"));
  BOOST_CHECK(logged(*serve, "event=job_joined group=g3 job=job-e members=1 restored=true"));
  BOOST_CHECK(logged(*serve, "event=worker_registered worker=job-e-driver-py role=driver"));
  // The phase in flight when the service went away ran again; nothing was lost or repeated
  // beyond it: four iterations, each with its three grants, plus the restarted phase.
  BOOST_CHECK_EQUAL(lt::count_lines(*across, "restart job-e"), 1);
  BOOST_CHECK_GE(lt::count_lines(*across, "grant "), 12);
  BOOST_CHECK(lt::miscounted_grants(*across).empty()); // the worker and the service agree
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_restored_group_gets_its_executor_when_its_job_is_first_needed) {
  lt::live_service s{{.iterations = 2}};
  auto serve = s.serve();
  for (auto job : {"job-p", "job-q"})
    BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file(job)}).exit_code, 0);
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve = s.serve();
  BOOST_REQUIRE(logged(*serve, "event=scheduler_restored jobs=2 groups=1 placed=2"));
  // No worker has come back: the group is restored and answers, without an executor yet.
  check_metrics_show(*serve, [](const std::string& page) {
    return page.find("loom_groups 1") != std::string::npos
           && page.find("loom_actors_up{actor=\"group_executor\"} 0") != std::string::npos;
  });
  BOOST_CHECK(serve->stderr_text().find("event=job_joined") == std::string::npos);
  // A job leaving the dormant group is gone from it; the other stays placed.
  BOOST_REQUIRE_EQUAL(s.admin({"cancel", "job-q"}).exit_code, 0);
  auto jobs = s.admin({"jobs"});
  BOOST_CHECK_MESSAGE(jobs.out.find("job-q  cancelled") != std::string::npos, jobs.out);
  BOOST_CHECK_MESSAGE(jobs.out.find("job-p  placed") != std::string::npos, jobs.out);
  // The first worker of job-p spawns the executor, which runs job-p's iterations alone.
  auto w = s.cpp_worker("driver-a", "job-p", "driver", 2, 50);
  BOOST_REQUIRE_MESSAGE(lt::finished(*w), "worker:\n" << w->stderr_text());
  BOOST_CHECK_EQUAL(lt::count_lines(*w, "grant "), 6); // 2 iterations x 3 phases
  BOOST_CHECK(logged(*serve, "event=job_joined group=g1 job=job-p"));
  BOOST_CHECK(serve->stderr_text().find("job=job-q members") == std::string::npos);
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve = s.serve();
  BOOST_REQUIRE(logged(*serve, "event=serve_ready"));
  jobs = s.admin({"jobs"});
  BOOST_CHECK_MESSAGE(jobs.out.find("job-p  finished") != std::string::npos, jobs.out);
  BOOST_CHECK_MESSAGE(jobs.out.find("job-q  cancelled") != std::string::npos, jobs.out);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_rollout_worker_and_a_trainer_run_one_job_together_in_either_language) {
  lt::live_service s{{.iterations = 3}};
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-a")}).exit_code, 0);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-b")}).exit_code, 0);
  // job-a: a Python rollout worker and a C++ trainer; job-b: the other way round.
  auto ra = s.python_example("rollout_worker.py", "rollout-1",
                             {"--job", "job-a", "--iterations", "3", "--phase-ms", "80"});
  auto ta = s.cpp_worker("trainer-1", "job-a", "train", 3, 80);
  auto rb = s.cpp_worker("rollout-1", "job-b", "rollout", 3, 80);
  auto tb = s.python_example("trainer.py", "trainer-1",
                             {"--job", "job-b", "--iterations", "3", "--phase-ms", "80"});
  for (auto* w : {ra.get(), ta.get(), rb.get(), tb.get()})
    BOOST_REQUIRE_MESSAGE(lt::finished(*w), "worker:\n" << w->stderr_text());
  BOOST_CHECK_MESSAGE(lt::count_lines(*ra, "grant job-a rollout") == 3, fmt::format("{}", fmt::join(ra->stdout_lines(), "\n")) << ta->stderr_text());
  BOOST_CHECK_EQUAL(lt::count_lines(*ta, "grant job-a training"), 3);
  BOOST_CHECK_EQUAL(lt::count_lines(*ta, "grant job-a sync"), 3);
  BOOST_CHECK_EQUAL(lt::count_lines(*rb, "grant job-b rollout"), 3);
  BOOST_CHECK_EQUAL(lt::count_lines(*tb, "training job-b"), 3);
  // Grants name the devices: a rollout its own on an h20 node, training the h800 pool's (#40
  // item 10), sync none.
  auto lines_with = [](const lt::child_process& w, const std::string& a, const std::string& b) {
    auto lines = w.stdout_lines();
    return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.rfind(a, 0) == 0 && l.find(b) != std::string::npos;
    });
  };
  BOOST_CHECK_EQUAL(lines_with(*rb, "grant job-b rollout", "devices h20-"), 3);
  BOOST_CHECK_EQUAL(lines_with(*ra, "grant job-a rollout", "devices h20-"), 3); // Python
  BOOST_CHECK_EQUAL(lines_with(*ta, "grant job-a training", "devices h800-"), 3);
  BOOST_CHECK_EQUAL(lines_with(*ta, "grant job-a sync", "devices -"), 3);
  auto jobs = s.admin({"jobs"});
  BOOST_CHECK(jobs.out.find("job-a  finished") != std::string::npos);
  BOOST_CHECK(jobs.out.find("job-b  finished") != std::string::npos);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(sessions_act_only_on_their_own_job_and_role) {
  lt::live_service s;
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-a")}).exit_code, 0);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-b")}).exit_code, 0);
  // Registration checks the job: a typo is refused.
  client typo{s.keys("driver-a")};
  BOOST_CHECK_EQUAL(error_code(typo.register_worker("driver", "w-typo", "job-aa")),
                    v1::ERROR_NOT_FOUND);
  client a{s.keys("driver-a")};
  BOOST_REQUIRE(a.register_worker("driver", "w-a", "job-a")->has_registered());
  // Another job's phases, whatever the key may do elsewhere.
  BOOST_CHECK_EQUAL(error_code(a.call(acquire_of("job-b", v1::PHASE_ROLLOUT))),
                    v1::ERROR_FORBIDDEN);
  BOOST_CHECK_EQUAL(error_code(a.call(release_of("job-b", v1::PHASE_TRAINING))),
                    v1::ERROR_FORBIDDEN);
  // A rollout worker runs rollouts only, and announces no fabric intent.
  client r{s.keys("rollout-1")};
  BOOST_REQUIRE(r.register_worker("rollout", "w-r", "job-b")->has_registered());
  BOOST_CHECK_EQUAL(error_code(r.call(acquire_of("job-b", v1::PHASE_TRAINING))),
                    v1::ERROR_FORBIDDEN);
  v1::Envelope intent;
  intent.mutable_fabric_intent()->set_owner("job-b");
  BOOST_CHECK_EQUAL(error_code(r.call(intent)), v1::ERROR_FORBIDDEN);
  // An OCS agent names the device it drives, one whose config says an agent drives it.
  client agent{s.keys("agent")};
  BOOST_CHECK_EQUAL(error_code(agent.register_worker("ocs-agent", "agent-0", "")),
                    v1::ERROR_INVALID);
  v1::Register to_emulated;
  to_emulated.set_role(v1::ROLE_OCS_AGENT);
  to_emulated.set_worker_id("agent-0");
  to_emulated.set_device("agg-pod0");
  BOOST_CHECK_EQUAL(error_code(agent.register_as(to_emulated)), v1::ERROR_NOT_FOUND);
  // A worker id belongs to its key and role, and to one live process.
  client thief{s.keys("trainer-1")};
  BOOST_CHECK_EQUAL(error_code(thief.register_worker("train", "w-a", "job-a")),
                    v1::ERROR_FORBIDDEN);
  client twin{s.keys("driver-a")};
  BOOST_CHECK_EQUAL(error_code(twin.register_worker("driver", "w-a", "job-a")),
                    v1::ERROR_CONFLICT);
  // The owner is undisturbed: its acquire is granted (its job's first, which stages it).
  auto g = a.acquire("job-a", "rollout", 10s);
  BOOST_REQUIRE_MESSAGE(g, g.error.message);
  // A waiting acquire (a trainer's, before the job's first rollout) is answered when its
  // job ends; later ones at once.
  client b{s.keys("trainer-1")};
  BOOST_REQUIRE(b.register_worker("train", "w-b", "job-b")->has_registered());
  auto waiting = std::async(std::launch::async, [&] { return b.acquire("job-b", "training"); });
  std::this_thread::sleep_for(300ms);
  // The operator sees who works for the job, where it runs and why it waits.
  auto shown = s.admin({"job", "job-b"});
  BOOST_CHECK_MESSAGE(shown.out.find("w-b (train)") != std::string::npos, shown.out);
  BOOST_CHECK(shown.out.find("iterations  0") != std::string::npos);
  BOOST_CHECK(shown.out.find("rollout     h20-") != std::string::npos);
  BOOST_CHECK(shown.out.find("waiting     ") != std::string::npos);
  BOOST_REQUIRE_EQUAL(s.admin({"cancel", "job-b"}).exit_code, 0);
  auto ended = waiting.get();
  BOOST_CHECK_EQUAL(ended.error.code, v1::ERROR_JOB_ENDED);
  BOOST_CHECK_EQUAL(b.acquire("job-b", "sync", 5s).error.code, v1::ERROR_JOB_ENDED);
  client late{s.keys("driver-b")};
  BOOST_CHECK_EQUAL(error_code(late.register_worker("driver", "w-late", "job-b")),
                    v1::ERROR_JOB_ENDED);
  // Nothing of this disturbed the service.
  BOOST_CHECK_EQUAL(s.admin({"jobs"}).exit_code, 0);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_release_sent_again_after_a_restart_counts_its_iteration_once) {
  lt::live_service s;
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-r", 5)}).exit_code, 0);
  client w{s.keys("driver-a")};
  BOOST_REQUIRE(w.register_worker("driver", "w-r", "job-r")->has_registered());
  // Grants name the iteration of the job's placement and the group that permits them.
  for (auto phase : {"rollout", "training", "sync"}) {
    phase_guard held{w, "job-r", phase, 10s};
    BOOST_REQUIRE_MESSAGE(held, held.error().message);
    BOOST_CHECK_EQUAL(held.grant().iteration(), 1u);
    BOOST_CHECK_EQUAL(held.grant().group(), "g1");
  }
  auto next = w.acquire("job-r", "rollout", 10s);
  BOOST_REQUIRE_MESSAGE(next, next.error.message);
  BOOST_CHECK_EQUAL(next->iteration(), 2u);
  // The service dies with iteration 1 counted and iteration 2's rollout running.
  serve->send_signal(SIGKILL);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve = s.serve();
  auto sync_release = [](uint64_t iteration, const std::string& group) {
    auto e = release_of("job-r", v1::PHASE_SYNC);
    e.mutable_phase_release()->set_iteration(iteration);
    e.mutable_phase_release()->set_group(group);
    return e;
  };
  // The client registers again and sends the release again: iteration 1's end was counted,
  // so it is acknowledged; an iteration not counted, or another group's, is run again.
  auto again = w.call(sync_release(1, "g1"));
  BOOST_REQUIRE(again);
  BOOST_CHECK_MESSAGE(again->has_ok(), again->DebugString());
  BOOST_CHECK_EQUAL(error_code(w.call(sync_release(2, "g1"))), v1::ERROR_RESTART_ITERATION);
  BOOST_CHECK_EQUAL(error_code(w.call(sync_release(1, "g7"))), v1::ERROR_RESTART_ITERATION);
  BOOST_CHECK_EQUAL(error_code(w.call(release_of("job-r", v1::PHASE_SYNC))),
                    v1::ERROR_RESTART_ITERATION); // an old client's release names none
  // The rollout running when the service died has no permit any more: run it again.
  auto rollout = w.release("job-r", "rollout", 1.0);
  BOOST_REQUIRE(rollout);
  BOOST_CHECK(rollout->restart_iteration());
  BOOST_CHECK(s.admin({"job", "job-r"}).out.find("iterations  1") != std::string::npos);
  auto resumed = w.acquire("job-r", "rollout", 10s);
  BOOST_REQUIRE_MESSAGE(resumed, resumed.error.message);
  BOOST_CHECK_EQUAL(resumed->iteration(), 2u);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_name_is_placed_once_and_an_impossible_job_says_why) {
  // (A second submission arriving while the first is being persisted gets the first's answer:
  // test_flows shows it one message at a time.)
  lt::live_service s;
  auto serve = s.serve();
  auto file = s.job_file("twice");
  auto first = s.admin({"submit", file});
  BOOST_CHECK(first.out.find("new_group in group g1") != std::string::npos);
  auto again = s.admin({"submit", file});
  BOOST_CHECK_NE(again.exit_code, 0);
  BOOST_CHECK(again.err.find("ERROR_ALREADY_EXISTS") != std::string::npos);
  BOOST_CHECK(again.err.find("already placed in g1") != std::string::npos);
  BOOST_CHECK(s.admin({"groups"}).out.find("g2") == std::string::npos);
  // A job no cluster node set can ever hold says so, with the numbers.
  lt::write_file(s.dir / "huge.toml", R"(name = "huge"
rollout_gpus = 64
training_gpus = 8
rollout_host_memory_gb = 10
training_host_memory_gb = 10
worst_rollout_s = 10
worst_training_s = 10
)");
  auto huge = s.admin({"submit", s.dir / "huge.toml"});
  BOOST_CHECK(huge.out.find("needs 64 rollout GPUs; the cluster has 16") != std::string::npos);
  // Jobs come a page at a time, in id order; the pages together are the whole list.
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("third")}).exit_code, 0);
  client admin{s.keys("admin")};
  std::vector<std::string> paged;
  v1::Envelope list;
  list.mutable_list_jobs()->set_limit(1);
  for (int pages = 0; pages < 10; ++pages) {
    auto page = admin.call(list);
    BOOST_REQUIRE(page && page->has_job_list());
    BOOST_CHECK_EQUAL(page->job_list().jobs_size(), 1);
    for (auto& j : page->job_list().jobs())
      paged.push_back(j.job());
    if (page->job_list().next_after().empty())
      break;
    list.mutable_list_jobs()->set_after(page->job_list().next_after());
  }
  std::vector<std::string> listed;
  for (auto& j : nlohmann::json::parse(s.admin({"jobs", "--json"}).out))
    listed.push_back(j["job"]);
  BOOST_CHECK_EQUAL(paged.size(), 3u);
  BOOST_CHECK(paged == listed);
  BOOST_CHECK(std::is_sorted(paged.begin(), paged.end()));
  // /metrics counts them by state (kept as jobs change, not by copying every job's status).
  check_metrics_show(*serve, [](const std::string& page) {
    return page.find("loom_jobs{state=\"placed\"} 2") != std::string::npos
           && page.find("loom_jobs{state=\"rejected\"} 1") != std::string::npos;
  });
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(metrics_judge_each_iteration_s_slo_on_both_solo_bases_as_replay_does) {
  lt::live_service s; // jobs of 1 s worst-case phases, SLO 4
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("job-m", 3)}).exit_code, 0);
  client w{s.keys("driver-a")};
  BOOST_REQUIRE(w.register_worker("driver", "w-m", "job-m")->has_registered());
  // The worker measures its phases at half their worst case, then, in the last iteration, at
  // next to nothing: only that one misses its SLO on the measured basis, none on the planned.
  for (double solo : {0.5, 0.5, 1e-7})
    for (const char* phase : {"rollout", "training", "sync"}) {
      auto g = w.acquire("job-m", phase, lt::live_limit);
      BOOST_REQUIRE_MESSAGE(g, phase << ": " << g.error.message);
      auto refused = w.release("job-m", phase, solo);
      BOOST_REQUIRE_MESSAGE(!refused.has_value(), phase << ": " << refused->message);
    }
  const std::vector<std::string> expected{
    R"(loom_iterations_total{basis="planned",within_slo="cold_start"} 1)",
    R"(loom_iterations_total{basis="planned",within_slo="true"} 2)",
    R"(loom_iterations_total{basis="measured",within_slo="cold_start"} 1)",
    R"(loom_iterations_total{basis="measured",within_slo="true"} 1)",
    R"(loom_iterations_total{basis="measured",within_slo="false"} 1)"};
  check_metrics_show(*serve, [&](const std::string& page) {
    return std::all_of(expected.begin(), expected.end(),
                       [&](auto& line) { return page.find(line) != std::string::npos; })
           && page.find(R"(basis="planned",within_slo="false")") == std::string::npos;
  });
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_job_left_on_an_oversized_training_pool_is_moved_and_its_worker_goes_on) {
  lt::live_service s;
  auto serve = s.serve();
  // X trains on both training nodes and Y packs into its group. Once X has run its two
  // iterations, Y alone holds 16 training GPUs for eight more iterations of 160 s worst case:
  // consolidation moves it to a group of its own size, and its worker, told it is placed
  // again, runs the interrupted iteration again there.
  auto spec = [&](const std::string& name, int training_gpus, int iterations) {
    auto path = s.dir / (name + ".toml");
    lt::write_file(path, fmt::format(R"(name = "{}"
rollout_gpus = 8
training_gpus = {}
rollout_host_memory_gb = 1
training_host_memory_gb = 1
worst_rollout_s = 100
worst_training_s = 60
model_gb = 0.1
slo = 2.0
iterations = {}
)",
                                     name, training_gpus, iterations));
    return std::string{path};
  };
  BOOST_REQUIRE(s.admin({"submit", spec("X", 16, 2)}).out.find("new_group in group g1")
                != std::string::npos);
  BOOST_REQUIRE(s.admin({"submit", spec("Y", 8, 10)}).out.find("direct_packing in group g1")
                != std::string::npos);
  auto wy = s.cpp_worker("driver-a", "Y", "driver", 10, 200);
  auto wx = s.cpp_worker("driver-b", "X", "driver", 2, 200);
  BOOST_REQUIRE_MESSAGE(lt::finished(*wx), "X's worker:\n" << wx->stderr_text());
  const auto lines = [](const std::vector<std::string>& l) {
    return fmt::format("{}", fmt::join(l, "\n"));
  };
  BOOST_REQUIRE_MESSAGE(lt::finished(*wy), "Y's worker:\n"
                                               << lines(wy->stdout_lines()) << "\n"
                                               << wy->stderr_text() << "\nservice:\n"
                                               << lines(serve->stderr_lines()));
  BOOST_CHECK(logged(*serve, "event=job_moved job=Y group=g1"));
  BOOST_CHECK(logged(*serve, "event=job_placed job=Y decision=new_group group=g2"));
  BOOST_CHECK_EQUAL(lt::count_lines(*wy, "left Y: job 'Y' is being placed again (moved)"), 1);
  BOOST_CHECK_MESSAGE(
    wy->read_until(
      false, [](const std::string& l) { return l == "finished Y status 0"; }, lt::live_limit),
    "Y's worker:\n" << wy->stderr_text());
  // Its new group holds one training node; the decision is durable across a restart.
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve = s.serve();
  auto y = s.admin({"job", "Y", "--json"});
  BOOST_CHECK(y.out.find("\"state\": \"finished\"") != std::string::npos);
  auto groups = s.admin({"groups"});
  BOOST_CHECK(groups.out.find("g1") == std::string::npos);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_failed_node_fails_its_jobs_and_stays_out_until_it_is_back) {
  using nlohmann::json;
  lt::live_service s;
  auto serve = s.serve();
  auto rollout_node = [&](const std::string& job) {
    auto j = json::parse(s.admin({"job", job, "--json"}).out);
    return j["rollout_nodes"].empty() ? std::string{} : j["rollout_nodes"][0].get<std::string>();
  };
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("a")}).exit_code, 0);
  BOOST_REQUIRE_EQUAL(rollout_node("a"), "h20-0");
  // A collective shim's plan spans h20-0 and h20-1.
  client shim{s.keys("shim")};
  BOOST_REQUIRE(shim.register_worker("collective-shim", "shim-0", "job-x")->has_registered());
  auto d = shim.call(lt::cross_rail_all_reduce("job-x", 0, 1));
  BOOST_REQUIRE(d && d->has_fabric_decision());
  // h20-0 fails: its job fails alone with the reason, and the shim's owner re-plans.
  auto out = s.admin({"node", "h20-0", "--reason", "GPU 3 XID 79", "--json"});
  BOOST_REQUIRE_MESSAGE(out.exit_code == 0, out.err);
  auto outcome = json::parse(out.out);
  BOOST_CHECK_EQUAL(outcome["failed_jobs"].dump(), R"(["a"])");
  BOOST_CHECK_EQUAL(outcome["replanning"].dump(), R"(["job-x"])");
  auto a = json::parse(s.admin({"job", "a", "--json"}).out);
  BOOST_CHECK_EQUAL(a["state"], "failed");
  BOOST_CHECK_EQUAL(a["reason"], "node h20-0 failed: GPU 3 XID 79");
  BOOST_CHECK(logged(*serve, "event=node_failed node=h20-0 pool=rollout reason=\"GPU 3 XID 79\""));
  // Placements avoid it, across a restart too.
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("b")}).exit_code, 0);
  BOOST_CHECK_EQUAL(rollout_node("b"), "h20-1");
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve = s.serve();
  BOOST_CHECK_EQUAL(s.admin({"node", "h20-1", "--json"}).exit_code, 0); // b fails
  auto none = s.admin({"submit", s.job_file("c")});
  BOOST_CHECK_NE(none.exit_code, 0);
  BOOST_CHECK_MESSAGE(none.out.find("rejected") != std::string::npos, none.out);
  // Back in service, it takes the next job; an unknown node is an error with its name.
  auto up = s.admin({"node", "h20-0", "--up"});
  BOOST_CHECK_MESSAGE(up.out.find("back in service") != std::string::npos, up.out);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("d")}).exit_code, 0);
  BOOST_CHECK_EQUAL(rollout_node("d"), "h20-0");
  auto unknown = s.admin({"node", "h20-9"});
  BOOST_CHECK_NE(unknown.exit_code, 0);
  BOOST_CHECK(unknown.err.find("no node 'h20-9'") != std::string::npos);
  // Tables end each line at its last cell, however long another row's reason is (#40 C11)...
  auto jobs = s.admin({"jobs"}).out;
  BOOST_CHECK_MESSAGE(jobs.find("GPU 3 XID 79") != std::string::npos, jobs);
  BOOST_CHECK_MESSAGE(jobs.find(" \n") == std::string::npos, jobs);
  // ... and money in JSON is in cents.
  for (auto& g : json::parse(s.admin({"groups", "--json"}).out)) {
    double cost = g["cost_per_hour"];
    BOOST_CHECK_EQUAL(cost, std::round(cost * 100) / 100);
  }
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(a_stuck_phase_is_reported_then_fails_its_job_alone) {
  lt::live_service s{{.worst_s = 1, .extra = "[policy.weave]\noverrun_factor = 2\n"
                                              "stuck_factor = 4\n"}};
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("stuck")}).exit_code, 0);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("fine", 4)}).exit_code, 0);
  // The stuck worker takes its rollout and never reports it done (but keeps heartbeating).
  client stuck{s.keys("driver-a")};
  BOOST_REQUIRE(stuck.register_worker("driver", "w-stuck", "stuck")->has_registered());
  BOOST_REQUIRE(stuck.acquire("stuck", "rollout", 10s));
  auto fine = s.cpp_worker("driver-b", "fine", "driver", 4, 50);
  BOOST_REQUIRE(logged(*serve, "event=phase_overrun group=g1 job=stuck phase=rollout"));
  auto inspected = s.admin({"job", "stuck", "--json"});
  BOOST_CHECK(inspected.out.find("\"overruns\": 1") != std::string::npos);
  BOOST_REQUIRE(logged(*serve, "event=job_failed job=stuck"));
  auto failed = s.admin({"job", "stuck"});
  BOOST_CHECK(failed.out.find("past 4 times its worst case") != std::string::npos);
  // Its group goes on: the other job completes its iterations.
  BOOST_REQUIRE_MESSAGE(lt::finished(*fine), fine->stderr_text());
  BOOST_CHECK_EQUAL(lt::count_lines(*fine, "grant "), 12);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

// WEAVE §5.3's failure detector is the service's: when the service itself stood still
// (stopped here, starved or swapped on a real host) past the heartbeat limit, its workers' frames
// wait unread in their sockets, and that time counts against none of them.
BOOST_AUTO_TEST_CASE(a_service_that_stood_still_blames_no_worker_for_its_own_silence) {
  lt::live_service s; // heartbeats every 200 ms, dead after 3 s of silence
  auto serve = s.serve();
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.job_file("steady", 6)}).exit_code, 0);
  auto worker = s.cpp_worker("driver-a", "steady", "driver", 6, 100);
  BOOST_REQUIRE(worker->read_until(
    false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, lt::live_limit));
  serve->send_signal(SIGSTOP);
  std::this_thread::sleep_for(5s);
  serve->send_signal(SIGCONT);
  BOOST_REQUIRE_MESSAGE(lt::finished(*worker), worker->stderr_text());
  BOOST_CHECK(s.admin({"jobs"}).out.find("steady  finished") != std::string::npos);
  auto lines = serve->stderr_lines();
  BOOST_CHECK(std::none_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("event=worker_dead") != std::string::npos;
  }));
  BOOST_CHECK(logged(*serve, "event=gateway_stalled"));
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

BOOST_AUTO_TEST_CASE(unknown_keys_get_nothing_and_bad_frames_get_typed_errors) {
  lt::live_service s;
  auto serve = s.serve();
  // A key the service does not know: the handshake fails, no reply ever comes, and closing
  // the client does not hang.
  {
    auto o = s.keys("intruder");
    o.timeout = 1s;
    client intruder{o};
    v1::Envelope list;
    list.mutable_list_jobs();
    BOOST_CHECK(!intruder.call(list));
    intruder.goodbye("leaving", false);
  }
  BOOST_CHECK(logged(*serve, "event=gateway_key_refused"));
  auto cli = s.admin({"jobs", "--key", s.dir / "keys/intruder", "--timeout-ms", "1000"});
  BOOST_CHECK_EQUAL(cli.exit_code, 1);
  // A worker key may not act as admin, and is told so.
  {
    client worker{s.keys("driver-a")};
    v1::Envelope list;
    list.mutable_list_jobs();
    BOOST_CHECK_EQUAL(error_code(worker.call(list)), v1::ERROR_FORBIDDEN);
    BOOST_CHECK_EQUAL(error_code(worker.register_worker("admin", "sneaky", "")),
                      v1::ERROR_FORBIDDEN);
  }
  // Raw frames on an admin connection: garbage, two frames, an unknown version.
  auto o = s.keys("admin");
  zmq::context_t ctx;
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  sock.set(zmq::sockopt::curve_serverkey, o.server_public_key);
  sock.set(zmq::sockopt::curve_publickey, o.public_key);
  sock.set(zmq::sockopt::curve_secretkey, o.secret_key);
  sock.set(zmq::sockopt::rcvtimeo, 5000);
  sock.connect(o.endpoint);
  auto answer = [&]() {
    zmq::message_t m;
    BOOST_REQUIRE(sock.recv(m));
    v1::Envelope e;
    BOOST_REQUIRE(e.ParseFromArray(m.data(), int(m.size())));
    return e;
  };
  sock.send(zmq::str_buffer("\x07garbage that is not protobuf"), zmq::send_flags::none);
  BOOST_CHECK_EQUAL(answer().error().code(), v1::ERROR_MALFORMED);
  sock.send(zmq::str_buffer("one"), zmq::send_flags::sndmore);
  sock.send(zmq::str_buffer("two"), zmq::send_flags::none);
  BOOST_CHECK_EQUAL(answer().error().code(), v1::ERROR_MALFORMED);
  v1::Envelope future;
  future.set_version(7);
  future.set_request_id(42);
  future.mutable_list_jobs();
  auto bytes = future.SerializeAsString();
  sock.send(zmq::buffer(bytes), zmq::send_flags::none);
  auto e = answer();
  BOOST_CHECK_EQUAL(e.request_id(), 42u);
  BOOST_CHECK_EQUAL(e.error().code(), v1::ERROR_UNSUPPORTED_VERSION);
  // The service is still there.
  BOOST_CHECK_EQUAL(s.admin({"jobs", "--json"}).exit_code, 0);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

/// A ROUTER socket playing a service that stops under a release: the release's STOPPING answer
/// (which may cross the ServiceStopping notice) sends the client to the next service with the
/// release, instead of failing the worker. Deterministic, unlike a SIGTERM race.
BOOST_AUTO_TEST_CASE(a_release_answered_stopping_goes_again_to_the_next_service) {
  zmq::context_t ctx;
  zmq::socket_t service{ctx, zmq::socket_type::router};
  service.set(zmq::sockopt::rcvtimeo, 10000);
  service.bind("tcp://127.0.0.1:*");
  zmq::message_t peer;
  auto next = [&] { // the next envelope that is not a heartbeat, within 10 s
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "the client sent nothing but heartbeats for 10 s");
      zmq::message_t id, body;
      BOOST_REQUIRE(service.recv(id) && service.recv(body));
      peer.copy(id);
      v1::Envelope e;
      BOOST_REQUIRE(e.ParseFromArray(body.data(), int(body.size())));
      if (!e.has_heartbeat())
        return e;
    }
  };
  auto answer = [&](v1::Envelope e, uint64_t request_id) {
    e.set_version(1);
    e.set_request_id(request_id);
    zmq::message_t id;
    id.copy(peer);
    service.send(id, zmq::send_flags::sndmore);
    service.send(zmq::buffer(e.SerializeAsString()), zmq::send_flags::none);
  };
  v1::Envelope registered;
  registered.mutable_registered()->set_heartbeat_ms(1000);
  client_options o;
  o.endpoint = service.get(zmq::sockopt::last_endpoint);
  client c{o};
  auto reg = std::async(std::launch::async, [&] { return c.register_worker("driver", "w", "j"); });
  auto first_register = next();
  BOOST_REQUIRE(first_register.has_register_());
  answer(registered, first_register.request_id());
  BOOST_REQUIRE(reg.get().value_or(v1::Envelope{}).has_registered());
  auto released = std::async(std::launch::async, [&] { return c.release("j", "rollout", 2.5); });
  auto release = next();
  BOOST_REQUIRE(release.has_phase_release());
  v1::Envelope stopping;
  stopping.mutable_error()->set_code(v1::ERROR_STOPPING);
  stopping.mutable_error()->set_message("the service is stopping");
  answer(stopping, release.request_id());
  auto again = next();
  BOOST_REQUIRE_MESSAGE(again.has_register_(), again.DebugString());
  answer(registered, again.request_id());
  auto resent = next();
  BOOST_REQUIRE_MESSAGE(resent.has_phase_release(), resent.DebugString());
  BOOST_CHECK_EQUAL(resent.phase_release().job(), "j");
  BOOST_CHECK_EQUAL(resent.phase_release().solo_s(), 2.5);
  v1::Envelope ok;
  ok.mutable_ok();
  answer(ok, resent.request_id());
  auto error = released.get();
  BOOST_CHECK_MESSAGE(!error, (error ? error->message : ""));
}

BOOST_AUTO_TEST_CASE(a_collective_shim_announces_an_intent_and_the_fabric_commits_it) {
  lt::live_service s;
  auto serve = s.serve();
  client shim{s.keys("shim")};
  auto reg = shim.register_worker("collective-shim", "shim-0", "job-x");
  BOOST_REQUIRE(reg && reg->has_registered());
  auto e = lt::cross_rail_all_reduce("job-x", 0, 1);
  auto* i = e.mutable_fabric_intent();
  auto d = shim.call(e);
  BOOST_REQUIRE(d && d->has_fabric_decision());
  BOOST_CHECK_EQUAL(d->fabric_decision().outcome(), "committed");
  BOOST_CHECK_EQUAL(d->fabric_decision().circuits(), 4u);
  auto plans = s.admin({"fabric", "--json"});
  BOOST_CHECK(plans.out.find("\"owner\": \"job-x\"") != std::string::npos);
  // mFabric §5.1: a MoE layer's dispatch for the owner's traffic monitor; then a layer's
  // first all-to-all planned from its forecast.
  v1::Envelope load;
  load.mutable_expert_load()->set_owner("job-x");
  load.mutable_expert_load()->set_layer(0);
  for (double t : {300.0, 100.0})
    load.mutable_expert_load()->add_tokens(t);
  auto loaded = shim.call(load);
  BOOST_CHECK(loaded && loaded->has_ok());
  load.mutable_expert_load()->set_tokens(1, -1);
  BOOST_CHECK_EQUAL(error_code(shim.call(load)), v1::ERROR_INVALID);
  auto forecast = lt::cross_rail_all_reduce("job-x", 0, 1);
  forecast.mutable_fabric_intent()->set_primitive("all-to-all");
  forecast.mutable_fabric_intent()->set_predicted(true);
  forecast.mutable_fabric_intent()->set_layer(1);
  auto planned = shim.call(forecast);
  BOOST_CHECK(planned && planned->has_fabric_decision());
  // One receive weight per member, finite and non-negative.
  forecast.mutable_fabric_intent()->add_receive_weights(1.0);
  BOOST_CHECK_EQUAL(error_code(shim.call(forecast)), v1::ERROR_INVALID);
  // A malformed intent is refused with the reason.
  i->set_stage("warp-drive");
  BOOST_CHECK_EQUAL(error_code(shim.call(e)), v1::ERROR_INVALID);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(lt::live_limit));
}

// SIGHUP reloads what can change under a running service (client keys, log level) and names
// what needs a restart; a config with errors changes nothing; the service keeps serving.
BOOST_AUTO_TEST_CASE(sighup_reloads_client_keys_and_log_level_and_names_what_needs_a_restart) {
  lt::live_service s{{.fabric = false}};
  auto serve = s.serve();
  auto intruder_options = s.keys("intruder");
  intruder_options.timeout = 1s;
  v1::Envelope list;
  list.mutable_list_jobs();
  {
    client intruder{intruder_options};
    BOOST_CHECK(!intruder.call(list)); // not a configured key: the handshake fails
    intruder.goodbye("leaving", false);
  }
  const auto original = lt::read_file(s.config);
  auto edited = original;
  auto driver = edited.find("driver = [");
  BOOST_REQUIRE(driver != std::string::npos);
  edited.insert(driver + std::string{"driver = ["}.size(), "\"keys/intruder.pub\", ");
  auto gbps = edited.find("cross_link_gbps = 20.0");
  BOOST_REQUIRE(gbps != std::string::npos);
  edited.replace(gbps, std::string{"cross_link_gbps = 20.0"}.size(), "cross_link_gbps = 40.0");
  const std::string service = "[service]\n";
  edited.replace(edited.find(service), service.size(), service + "log_level = \"warn\"\n");
  lt::write_file(s.config, edited);
  serve->send_signal(SIGHUP);
  BOOST_REQUIRE(logged(*serve, "event=config_reloaded"));
  auto line = serve->stderr_text().substr(serve->stderr_text().find("event=config_reloaded"));
  line = line.substr(0, line.find('\n'));
  BOOST_CHECK_MESSAGE(line.find("needs_restart=\"cluster.cross_link_gbps\"") != std::string::npos,
                      line);
  BOOST_CHECK_MESSAGE(line.find("log_level=warn") != std::string::npos, line);
  {
    client intruder{s.keys("intruder")}; // now a driver key: answered (a driver may not list)
    auto reply = intruder.call(list);
    BOOST_REQUIRE(reply);
    BOOST_CHECK(reply->has_error() || reply->has_job_list());
    intruder.goodbye("leaving", false);
  }
  lt::write_file(s.config, edited + "\n[policy.weave]\nno_such_knob = 1\n");
  serve->send_signal(SIGHUP);
  BOOST_CHECK(logged(*serve, "event=reload_refused"));
  BOOST_CHECK(serve->stderr_text().find("no_such_knob") != std::string::npos); // file, line, key
  {
    client admin{s.keys("admin")}; // still served, on the config it had
    auto jobs = admin.call(list);
    BOOST_CHECK(jobs && jobs->has_job_list());
  }
  serve->send_signal(SIGTERM);
  BOOST_CHECK_EQUAL(serve->wait(lt::live_limit).value_or(-1), 0);
  // At warn, the info lines of the stop are no longer written.
  BOOST_CHECK(serve->stderr_text().find("event=shutdown_requested") == std::string::npos);
}
