#pragma once
// `loom ocs-emu`: a TL1 switch emulator on TCP, for tests, demos and third-party TL1 clients.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "drivers/tl1_switch.hpp"

namespace loom {

struct ocs_emulator_options {
  std::string bind = "127.0.0.1";
  uint16_t port = 3082; // 0 picks a free port (logged as event=ocs_emu_listening)
  tl1_switch_options switch_options;
  std::chrono::milliseconds delay{0}; // switching time of every ENT/DLT-PATCH
  uint64_t drop_after = 0;            // fault: apply the (N+1)th change, then drop the session
  bool hang = false;                  // fault: read commands, never answer
  std::vector<uint32_t> fail_later;   // fault: ports that fail after fail_after, mid-run
  std::chrono::milliseconds fail_after{0};
  size_t max_sessions = 256;
  size_t max_command_bytes = 4096;
  // A session that has not logged in (ACT-USER) by then, or that sends nothing for that long,
  // is closed: slow or silent clients cannot hold every session.
  std::chrono::milliseconds login_timeout{10'000};
  std::chrono::milliseconds idle_timeout{300'000};
};

/// Serves until SIGINT or SIGTERM; returns the process exit code.
int run_ocs_emulator(const ocs_emulator_options& options);

} // namespace loom
