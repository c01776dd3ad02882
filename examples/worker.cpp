// An RL framework's driver process on libloomclient (WEAVE §5.1 shim): it runs a job's
// iterations, asking Loom before every phase and reporting when it ends, with heartbeats from
// a thread of their own. The "work" is a sleep of the given length, so it can stand in for a
// real framework in demos and tests.
//
//   loom-example-worker --endpoint tcp://127.0.0.1:5555 --server-key KEYS/server.pub
//       --key KEYS/worker --job math-7b --role rollout --iterations 3 --phase-ms 50

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "loom.pb.h"
#include "loom/client.hpp"

namespace {

const char* arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0)
      return argv[i + 1];
  return fallback;
}

} // namespace

int main(int argc, char** argv) {
  loom::client_options opt;
  opt.endpoint = arg(argc, argv, "--endpoint", "tcp://127.0.0.1:5555");
  std::string server_key = arg(argc, argv, "--server-key", "");
  std::string key = arg(argc, argv, "--key", "");
  if (!server_key.empty()) {
    opt.server_public_key = loom::read_key(server_key);
    opt.public_key = loom::read_key(key + ".pub");
    opt.secret_key = loom::read_key(key + ".secret");
  }
  std::string job = arg(argc, argv, "--job", "job");
  std::string role = arg(argc, argv, "--role", "rollout");
  std::string worker_id = arg(argc, argv, "--id", (job + "-worker").c_str());
  int iterations = std::atoi(arg(argc, argv, "--iterations", "3"));
  int phase_ms = std::atoi(arg(argc, argv, "--phase-ms", "50"));
  opt.timeout = std::chrono::milliseconds{std::atoi(arg(argc, argv, "--timeout-ms", "60000"))};

  loom::client c{opt};
  auto registered = c.register_worker(role, worker_id, job);
  if (!registered || !registered->has_registered()) {
    std::fprintf(stderr, "register failed: %s\n",
                 registered && registered->has_error() ? registered->error().message().c_str()
                                                       : "no answer");
    return 1;
  }
  std::printf("registered %s resumed=%d\n", worker_id.c_str(), registered->registered().resumed());
  std::fflush(stdout);
  c.on_command([&](const loom::v1::Envelope& e) {
    if (e.has_tail_migration())
      std::printf("tail %s now on %u GPUs\n", e.tail_migration().job().c_str(),
                  e.tail_migration().gpus());
    if (e.has_job_left())
      std::printf("left %s: %s\n", e.job_left().job().c_str(), e.job_left().reason().c_str());
    std::fflush(stdout);
  });
  int status = 0;
  for (int it = 0; it < iterations && status == 0; ++it)
    for (auto phase : {"rollout", "training", "sync"}) {
      loom::v1::Envelope acquire;
      acquire.mutable_phase_acquire()->set_job(job);
      acquire.mutable_phase_acquire()->set_phase(std::string{phase} == "rollout" ? loom::v1::PHASE_ROLLOUT
                                                 : std::string{phase} == "training" ? loom::v1::PHASE_TRAINING
                                                                                    : loom::v1::PHASE_SYNC);
      auto reply = c.call(acquire);
      if (reply && reply->has_error() && reply->error().code() == loom::v1::ERROR_NOT_REGISTERED) {
        // The service restarted: it re-admitted the job; run this iteration again.
        std::printf("restart %s iteration %d: %s\n", job.c_str(), it,
                    reply->error().message().c_str());
        std::fflush(stdout);
        --it;
        break;
      }
      if (!reply || !reply->has_phase_grant()) {
        std::fprintf(stderr, "acquire %s failed: %s\n", phase,
                     reply && reply->has_error() ? reply->error().message().c_str() : "no answer");
        status = 1;
        break;
      }
      auto grant = reply->phase_grant();
      std::printf("grant %s %s iteration %d gpus %u\n", job.c_str(), phase, it, grant.gpus());
      std::fflush(stdout);
      auto start = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds{phase_ms});
      if (std::string{phase} == "rollout") {
        loom::v1::Envelope progress;
        progress.mutable_progress()->set_job(job);
        progress.mutable_progress()->set_responses_done(256);
        progress.mutable_progress()->set_responses_total(256);
        c.send(progress);
      }
      if (!c.release(job, phase,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                       .count())) {
        status = 1;
        break;
      }
    }
  loom::v1::Envelope bye;
  bye.mutable_goodbye()->set_reason(status == 0 ? "iterations done" : "failed");
  bye.mutable_goodbye()->set_job_finished(status == 0);
  c.send(bye);
  std::printf("finished %s status %d\n", job.c_str(), status);
  return status;
}
