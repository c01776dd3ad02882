#pragma once
// Moving requests between generation instances (OrchestrRL §4.1 C_mig, App. A): the KV cache
// is either transferred directly over the NICs, paying a fixed setup and synchronisation cost,
// or rebuilt on the destination by replaying the forward pass over the cached token ids. The
// runtime takes the cheaper per event (kv_move_cost, types/generation.hpp). Pure.

#include <cstdint>

#include "generation/engine_model.hpp"

namespace loom {

struct kv_transfer_path {
  double nic_gbps = 200;   // App. A's example: one 200 Gbps NIC
  int nics = 1;            // instances laid out across more NICs transfer faster
  double efficiency = 0.8; // achieved share of line rate
  double setup_ms = 20;    // connection, memory registration and the end barrier
};

/// Cost of moving `sequences` requests holding `tokens_per_sequence` tokens each onto a
/// destination instance parallelised as `dst`.
kv_move_cost kv_move_cost_of(const engine_model& engine, const parallel_config& dst,
                             int sequences,
                             int64_t tokens_per_sequence, const kv_transfer_path& path = {});

} // namespace loom
