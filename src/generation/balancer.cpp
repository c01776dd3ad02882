#include "generation/balancer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "protocol/inspect.hpp"

namespace loom {

balancer_actor::behavior_type balancer(balancer_actor::stateful_pointer<balancer_state> self,
                                       balancer_params params) {
  self->state.core.emplace(params);
  return {
    [self](balance_atom, std::vector<gen_worker>& workers) {
      auto& core = *self->state.core;
      auto moves = core.tick(std::move(workers));
      if (!moves.empty())
        spdlog::debug("event=gen_balanced tick={} migrations={}", core.ticks(), moves.size());
      return moves;
    },
  };
}

} // namespace loom
