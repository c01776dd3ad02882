#pragma once
// `loom drive`'s engines: `loom-example-engine` processes, one per node of a generation
// scenario's deployment, each writing its output to DIR/engine-N.log. They die with the drive
// (PR_SET_PDEATHSIG) and are stopped with SIGTERM at its end.

#include <string>
#include <vector>

#include <caf/expected.hpp>

namespace loom::replay {

class engine_fleet {
public:
  /// Starts one process per argument vector (argv[0] is the binary).
  static caf::expected<engine_fleet> start(const std::vector<std::vector<std::string>>& argvs,
                                           const std::string& log_dir);
  engine_fleet(engine_fleet&&) noexcept;
  engine_fleet& operator=(engine_fleet&&) = delete;
  engine_fleet(const engine_fleet&) = delete;
  ~engine_fleet();

  /// How many have exited so far (a crashed engine shows here).
  size_t exited();
  /// SIGTERM, then waits for each (SIGKILL after 5 s); their exit codes.
  std::vector<int> stop();

private:
  engine_fleet() = default;
  std::vector<int> pids_;
  std::vector<int> codes_; // -1 while running
};

/// The `loom-example-engine` next to the running binary.
std::string default_engine_binary();

} // namespace loom::replay
