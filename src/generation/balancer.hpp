#pragma once
// The balancer actor (OrchestrRL §4.2, Algorithm 1 event 2): on each monitoring tick it runs
// plan_migrations over the workers' loads and answers the moves. A request it moved stays
// pinned for a few ticks: a move shifts the loads it was computed from, and without the pause
// requests oscillate between workers. It decides nothing durable: a lost tick is recomputed
// from the next one's loads.

#include <cstdint>
#include <unordered_map>

#include "core/actors.hpp"
#include "generation/load_index.hpp"

namespace loom {

struct balancer_state {
  static inline const char* name = "balancer";
  balancer_params params;
  uint64_t ticks = 0;
  uint64_t migrations = 0;
  std::unordered_map<uint64_t, uint64_t> moved_at; // request -> tick of its last move
};

balancer_actor::behavior_type balancer(balancer_actor::stateful_pointer<balancer_state> self,
                                       balancer_params params);

} // namespace loom
