#pragma once
// `loom ocs-emu`: a TL1 switch emulator on TCP, for tests, demos and third-party TL1 clients.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "drivers/tl1_switch.hpp"

namespace loom {

/// How replies are framed: Loom's emulator dialect (each message ends ";" CR LF), or strictly
/// as GR-831 does (messages open with CR LF LF and end with a bare ';', long replies continue
/// over messages ending with '>', slow commands are acknowledged "IP", and the switch sends
/// autonomous alarm messages of its own).
enum class tl1_framing { loom, gr831 };

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
  tl1_framing framing = tl1_framing::loom;
  size_t lines_per_message = 4;                   // gr831: data lines before a '>' continuation
  std::chrono::milliseconds autonomous_every{0};  // gr831: a REPT ALM message to each session
  // Fault: every logged-in session is logged out this often (TCP kept), as a switch's session
  // timer or an operator's CANC-USER would; 0: never.
  std::chrono::milliseconds logout_every{0};
};

/// Serves until SIGINT or SIGTERM; returns the process exit code.
int run_ocs_emulator(const ocs_emulator_options& options);

} // namespace loom
