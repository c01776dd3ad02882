#include "generation/balancer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace loom {

balancer_actor::behavior_type balancer(balancer_actor::stateful_pointer<balancer_state> self,
                                       balancer_params params) {
  self->state.params = params;
  return {
    [self](balance_atom, std::vector<gen_worker>& workers) {
      auto& st = self->state;
      ++st.ticks;
      auto moves = plan_migrations(workers, st.params);
      st.migrations += moves.size();
      if (!moves.empty())
        spdlog::debug("event=gen_balanced tick={} workers={} migrations={}", st.ticks,
                      workers.size(), moves.size());
      return moves;
    },
  };
}

} // namespace loom
