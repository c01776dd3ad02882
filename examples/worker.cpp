// An RL framework's worker process on libloomclient (WEAVE §5.1 shim). It runs a job's
// iterations in its role's phases, each held with a loom::phase_guard: a driver (a single
// controller, veRL-style) runs rollout, training and sync; a rollout worker the rollouts; a
// trainer the training and the sync that follows it. The "work" is a sleep of the given
// length, so it can stand in for a real framework in demos and tests. Run with --help.

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/example_support.hpp"
#include "loom/client.hpp"

namespace {

struct settings {
  loom::client_options client;
  std::string server_key, key, job = "job", role = "driver", id;
  int iterations = 3;
  int phase_ms = 50;
  int timeout_ms = 0;
};

std::vector<std::string> phases_of(const std::string& role) {
  if (role == "rollout")
    return {"rollout"};
  if (role == "train")
    return {"training", "sync"};
  return {"rollout", "training", "sync"};
}

using loom::example::say;

enum class step { done, again, ended, stop };

/// Where a grant runs, as "node:0,1,2 node2:0" (what a framework would turn into
/// CUDA_VISIBLE_DEVICES on each node); "-" for none.
template <class Nodes>
std::string devices_text(const Nodes& nodes) {
  std::string out;
  for (auto& n : nodes) {
    out += (out.empty() ? "" : " ") + n.node() + ":";
    for (int i = 0; i < n.devices_size(); ++i)
      out += (i ? "," : "") + std::to_string(n.devices(i));
  }
  return out.empty() ? "-" : out;
}

/// One phase, held for `phase_ms`; a rollout reports its responses done (WEAVE §4.3).
step run_phase(loom::client& c, const settings& s, const std::string& phase, int it) {
  loom::phase_guard held{c, s.job, phase, std::chrono::milliseconds{s.timeout_ms}};
  if (!held) {
    if (held.error().restart_iteration()) {
      say("restart %s iteration %d: %s", s.job.c_str(), it, held.error().message.c_str());
      return step::again;
    }
    if (held.error().job_ended()) { // the service ended the job: it counts its iterations
      say("ended %s: %s", s.job.c_str(), held.error().message.c_str());
      return step::ended;
    }
    std::fprintf(stderr, "acquire %s failed: %s\n", phase.c_str(), held.error().message.c_str());
    return step::stop;
  }
  say("grant %s %s iteration %d gpus %u loom_iteration %llu devices %s", s.job.c_str(),
      phase.c_str(), it, held.grant().gpus(),
      static_cast<unsigned long long>(held.grant().iteration()),
      devices_text(held.grant().devices()).c_str());
  std::this_thread::sleep_for(std::chrono::milliseconds{s.phase_ms});
  if (phase == "rollout")
    c.progress(s.job, 256, 256);
  if (held.done())
    return step::done;
  if (held.error().restart_iteration()) {
    say("restart %s iteration %d: %s", s.job.c_str(), it, held.error().message.c_str());
    return step::again;
  }
  std::fprintf(stderr, "release %s failed: %s\n", phase.c_str(), held.error().message.c_str());
  return step::stop;
}

/// The iterations in the role's phases; an iteration the service restarted under runs again.
int run(loom::client& c, const settings& s) {
  for (int it = 0; it < s.iterations;) {
    auto outcome = step::done;
    for (auto& phase : phases_of(s.role))
      if ((outcome = run_phase(c, s, phase, it)) != step::done)
        break;
    if (outcome == step::stop)
      return 1;
    if (outcome == step::ended)
      return 0;
    if (outcome == step::done)
      ++it;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"A worker of an RL job on Loom: runs its role's phases of each iteration when "
               "the service grants them (the work itself is a sleep)."};
  loom::example::add_connection_options(app, s.client, s.server_key, s.key, "This worker's");
  app.add_option("--job", s.job, "the job it runs (submitted before)")->required();
  app.add_option("--role", s.role, "driver (every phase), rollout, or train")
    ->check(CLI::IsMember({"driver", "rollout", "train"}))
    ->capture_default_str();
  app.add_option("--id", s.id, "worker id (default: JOB-ROLE)");
  app.add_option("--iterations", s.iterations, "iterations to run")->capture_default_str();
  app.add_option("--phase-ms", s.phase_ms, "how long each phase works")->capture_default_str();
  app.add_option("--timeout-ms", s.timeout_ms,
                 "give up waiting for a phase after this long (0: wait as long as it takes)")
    ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!loom::example::load_keys(s.client, s.server_key, s.key))
    return 2;
  if (s.id.empty())
    s.id = s.job + "-" + s.role;

  loom::client c{s.client};
  auto registered = c.register_worker(s.role, s.id, s.job);
  if (!registered || !registered->has_registered()) {
    std::fprintf(stderr, "register failed: %s\n",
                 registered && registered->has_error() ? registered->error().message().c_str()
                                                       : "no answer");
    return 1;
  }
  say("registered %s resumed=%d", s.id.c_str(), int(registered->registered().resumed()));
  c.on_command([](const loom::v1::Envelope& e) {
    if (e.has_tail_migration())
      say("tail %s now on %u GPUs: %s", e.tail_migration().job().c_str(),
          e.tail_migration().gpus(), devices_text(e.tail_migration().devices()).c_str());
    if (e.has_job_left())
      say("left %s: %s", e.job_left().job().c_str(), e.job_left().reason().c_str());
  });
  const int status = run(c, s);
  // A driver or trainer finishing its last iteration completes the job; a rollout worker
  // leaves that to them.
  c.goodbye(status == 0 ? "iterations done" : "failed", status == 0 && s.role != "rollout");
  say("finished %s status %d", s.job.c_str(), status);
  return status;
}
