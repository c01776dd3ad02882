#pragma once
// The OCS driver actors: an in-process emulation (replay and tests) and TL1 over TCP (real
// switches, and `loom ocs-emu`). Both implement ocs_driver_actor from protocol/actors.hpp.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>

#include <caf/typed_response_promise.hpp>

#include "drivers/latency_model.hpp"
#include "drivers/tl1_client.hpp"
#include "drivers/xc_table.hpp"
#include "protocol/actors.hpp"
#include "types/fabric_config.hpp"

namespace loom {

struct emulated_ocs_config {
  std::string device;
  switch_size size{16, 16};
  std::set<uint32_t> masked;
  latency_profile latency = latency_profile::mfabric_measured();
  caf::timespan link_up_delay{0};        // NIC activation after a change (mFabric §6, Opus §5.1)
  caf::timespan command_timeout{std::chrono::seconds{2}}; // how long an injected hang lasts
  uint64_t seed = 1;
};

struct emulated_ocs_state {
  static inline const char* name = "emulated_ocs";
  struct pending {
    caf::typed_response_promise<apply_report> promise;
    apply_report report;
    bool times_out = false;
  };
  std::optional<xc_table> table;
  std::optional<latency_sampler> sampler;
  std::mt19937_64 fault_rng;
  ocs_fault faults;
  driver_health health;
  std::map<uint64_t, pending> in_flight;
  uint64_t next_id = 1;
  emulated_ocs_config config;
};

emulated_ocs_actor::behavior_type
emulated_ocs(emulated_ocs_actor::stateful_pointer<emulated_ocs_state> self,
             emulated_ocs_config config);

struct tl1_ocs_config {
  std::string device;
  tl1_endpoint endpoint;
  tl1_client_options options;
  std::set<uint32_t> masked;
  caf::timespan link_up_delay{0}; // NIC activation after a change, as the device is known for
};

struct tl1_ocs_state {
  static inline const char* name = "tl1_ocs";
  std::unique_ptr<tl1_client> client;
  std::optional<xc_table> table; // the device as last read or changed; empty = re-read first
  driver_health health;
  std::set<uint32_t> masked;
  caf::timespan link_up_delay{0};
};

/// Blocks on the device: spawn it with caf::detached so it has a thread of its own.
ocs_driver_actor::behavior_type tl1_ocs_driver(ocs_driver_actor::stateful_pointer<tl1_ocs_state> self,
                                               tl1_ocs_config config);

/// The live driver of a configured device: the emulation (latency of its technology, OrchestrRL
/// Table 2) or TL1 over TCP on its own thread, as a P x P switch whose duplex port p is input p
/// and output P + p. Nothing for devices OCS agents drive (spawn_agent_driver).
std::optional<ocs_driver_actor> spawn_ocs_driver(caf::actor_system& sys, const ocs_device& device,
                                                 uint64_t seed = 1);

} // namespace loom
