#pragma once
// The balancer actor (OrchestrRL §4.2, Algorithm 1 event 2): on each monitoring tick it runs
// plan_migrations over the workers' loads and answers the moves. It decides nothing durable:
// a lost tick is recomputed from the next one's loads.

#include <cstdint>

#include "core/actors.hpp"
#include "generation/load_index.hpp"

namespace loom {

struct balancer_state {
  static inline const char* name = "balancer";
  balancer_params params;
  uint64_t ticks = 0;
  uint64_t migrations = 0;
};

balancer_actor::behavior_type balancer(balancer_actor::stateful_pointer<balancer_state> self,
                                       balancer_params params);

} // namespace loom
