#pragma once
// The balancer actor (OrchestrRL §4.2, Algorithm 1 event 2): a thin shell around
// reactive_balancer. On each monitoring tick it answers the workers' loads with the moves to
// make. It decides nothing durable: a lost tick is recomputed from the next one's loads.

#include <optional>

#include "generation/load_index.hpp"
#include "protocol/actors.hpp"

namespace loom {

struct balancer_state {
  static inline const char* name = "balancer";
  std::optional<reactive_balancer> core;
};

balancer_actor::behavior_type balancer(balancer_actor::stateful_pointer<balancer_state> self,
                                       balancer_params params);

} // namespace loom
