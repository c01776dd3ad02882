#pragma once
// Core plain data shared by every component: the roles peers authenticate as, and the
// cross-connects of an optical circuit switch with the messages that change them (the OCS SAI
// draft and real N x M switches: inputs 1..N, outputs N+1..N+M, each port in at most one
// cross-connect, re-patching is a remove then an add). No CAF: inspect() lives in
// protocol/inspect.hpp.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"

namespace loom {

/// What a peer of the gateway is, as its CURVE key is configured and its Register says.
enum class worker_role : uint8_t {
  rollout,         // an RL framework's rollout workers
  train,           // its trainers
  gen_instance,    // an inference engine: one node's server, hosting the deployment's
                   // instances its GPUs carry (OrchestrRL)
  collective_shim, // a collective shim (Opus)
  ocs_agent,       // an OCS agent speaking for a switch
  admin,           // operators and the loom CLI
  driver,          // a framework's single controller, running every phase of its job
  gen_router,      // a framework's request router for a generation deployment (OrchestrRL)
};

template <>
struct enum_names<worker_role> {
  static constexpr std::array<std::pair<worker_role, std::string_view>, 8> table{{
    {worker_role::rollout, "rollout"},
    {worker_role::train, "train"},
    {worker_role::gen_instance, "gen-instance"},
    {worker_role::collective_shim, "collective-shim"},
    {worker_role::ocs_agent, "ocs-agent"},
    {worker_role::admin, "admin"},
    {worker_role::driver, "driver"},
    {worker_role::gen_router, "gen-router"},
  }};
};

struct cross_connect {
  uint32_t in = 0;
  uint32_t out = 0;

  friend bool operator==(const cross_connect&, const cross_connect&) = default;
  friend auto operator<=>(const cross_connect&, const cross_connect&) = default;
};

/// One reconfiguration: removes first, then adds. Cross-connects in neither list stay up.
struct xc_diff {
  std::vector<cross_connect> removes;
  std::vector<cross_connect> adds;
};

/// What an applied diff cost.
struct apply_report {
  int64_t latency_ns = 0;  // from request to the device confirming every change
  int64_t ready_ns = 0;    // until the new circuits carry traffic (adds link-up delay)
  uint32_t attempts = 1;   // > 1 when the driver reconnected and resumed
};

struct driver_health {
  std::string device;
  bool connected = false;
  uint64_t applies = 0;
  uint64_t failures = 0;
  uint32_t cross_connects = 0;
  uint32_t inputs = 0;  // the device's geometry as it reports it; 0 until read
  uint32_t outputs = 0;
  std::string last_error;
  std::vector<uint32_t> failed_ports; // ports the device raises an alarm on (loss of light)
};

/// A request to an OCS agent (Opus §4.3: a switch driven from next to it, over loom.v1).
enum class ocs_request_kind : uint8_t {
  apply, // change cross-connects (the diff)
  read,  // health, geometry, alarms and every cross-connect
};

struct ocs_request {
  std::string device;
  uint64_t id = 0; // the agent echoes it
  ocs_request_kind kind = ocs_request_kind::read;
  xc_diff diff;
};

/// An agent's answer: the applied diff's cost or the read-back state, or why it failed.
struct ocs_reply {
  std::string device;
  uint64_t id = 0;
  uint8_t failure = 0; // an errc (protocol/error.hpp); 0: done
  std::string error;
  apply_report report;
  driver_health health;
  std::vector<cross_connect> cross_connects;
};

/// Faults the emulated driver injects (replay and tests).
struct ocs_fault {
  std::vector<uint32_t> failed_ports; // alarmed; adds on them are denied
  uint32_t refuse_next = 0;           // deny the next N applies
  uint32_t timeout_next = 0;          // let the next N applies time out
  double refuse_probability = 0;      // then deny / time out at random (seeded)
  double timeout_probability = 0;
};

} // namespace loom
