#pragma once
// A TL1 client for one switch: blocking calls with a deadline per command, pipelined commands
// correlated by ctag, reconnect and re-login with exponential backoff. Used by the TL1 driver
// actor, which runs detached so that blocking never stalls CAF's scheduler.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "drivers/xc_table.hpp"
#include "types/common.hpp"

namespace loom {

struct tl1_endpoint {
  std::string host = "127.0.0.1";
  uint16_t port = 3082;
  std::string user = "admin";
  std::string password = "root";
};

struct tl1_client_options {
  std::chrono::milliseconds command_timeout{2000}; // per command, and for connecting
  int max_attempts = 3;                            // per operation
  std::chrono::milliseconds backoff{50};           // doubled after each failed attempt
  size_t pipeline_window = 256;                    // commands in flight at once
};

class tl1_client {
public:
  tl1_client(tl1_endpoint endpoint, tl1_client_options options);
  ~tl1_client();
  tl1_client(const tl1_client&) = delete;
  tl1_client& operator=(const tl1_client&) = delete;

  /// Every cross-connect of the switch (RTRV-PATCH).
  caf::expected<std::vector<cross_connect>> list();

  /// Ports with a standing alarm (RTRV-ALM-ALL), e.g. loss of light on a failed port.
  caf::expected<std::vector<uint32_t>> alarms();

  /// The switch geometry (RTRV-EQPT SYSTEM PARAMETER=SIZE).
  caf::expected<switch_size> size();

  /// Applies the diff: one DLT-PATCH for all removes, then the ENT-PATCHes pipelined. After a
  /// lost connection or a timeout it reconnects, reads the switch back and sends only what is
  /// still missing, so a change is never made twice. A DENY is final. Returns the attempts used.
  caf::expected<uint32_t> apply(const xc_diff& diff);

  bool connected() const;
  void disconnect();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace loom
