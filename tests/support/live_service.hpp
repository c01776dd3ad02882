#pragma once
// A real `loom serve` in a temp directory for integration tests: its config (CURVE on, fast
// heartbeats, the default cold start), client keys per role, job files, and the example
// workers (C++ and Python) as child processes.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "loom/client.hpp"
#include "tests/support/process.hpp"

namespace loom::test {

/// Deadline of every wait on a child (a guard against hangs, not a timing assertion).
constexpr auto live_limit = std::chrono::seconds{60};

struct live_options {
  int rollout_nodes = 2;
  int training_nodes = 2;
  int iterations = 0;    // per job file; 0: until finished
  double worst_s = 1;    // worst-case rollout and training of every job
  bool fabric = true;
  std::string extra{};   // more config text (e.g. a [policy.weave] table)
  std::string security{}; // more [security] settings, one per line
};

class live_service {
public:
  explicit live_service(live_options options = {});

  temp_dir dir;
  int port = free_tcp_port();
  std::string config = dir / "loom.toml";

  std::string endpoint() const;
  /// Writes DIR/NAME.toml for a job of 8 + 8 GPUs (iterations: the options' unless given).
  std::string job_file(const std::string& name, int iterations = -1) const;

  /// A CLI command against the service (`loom ARGS -c CONFIG`).
  run_result admin(std::vector<std::string> args) const;
  /// `loom serve`, ready (it logged serve_ready).
  std::unique_ptr<child_process> serve() const;

  /// The C++ example worker (examples/worker.cpp) with the key of `who`.
  std::unique_ptr<child_process> cpp_worker(const std::string& who, const std::string& job,
                                            const std::string& role, int iterations,
                                            int phase_ms) const;
  /// loom-example-engine with the key of `who` (also its engine id), and more arguments.
  std::unique_ptr<child_process> engine(const std::string& who,
                                        std::vector<std::string> args) const;
  /// A Python example (python/examples/SCRIPT) with the key of `who`, and more arguments.
  std::unique_ptr<child_process> python_example(const std::string& script,
                                                const std::string& who,
                                                std::vector<std::string> args) const;

  /// Client options with the keys of `who` ("admin": the service's own admin pair).
  client_options keys(const std::string& who) const;

private:
  live_options options_;
};

/// A collective shim's FabricIntent: an all-reduce of 1 GB in the train stage over GPU 0 of
/// server a (rail 0) and GPU 4 of server b (rail 1), at a 1 s stage boundary.
v1::Envelope cross_rail_all_reduce(const std::string& owner, uint32_t a, uint32_t b);

/// The worker printed "finished ... status 0" (or exited) before the deadline.
bool finished(child_process& w);

/// The example worker's lines starting with `prefix`.
int count_lines(const child_process& w, const std::string& prefix);

/// The example worker's grants in which its own iteration count (from 0) and the service's
/// (`loom_iteration`, from 1) disagree: an iteration run twice or skipped by one side.
std::vector<std::string> miscounted_grants(const child_process& w);

} // namespace loom::test
