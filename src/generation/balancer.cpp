#include "generation/balancer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace loom {

balancer_actor::behavior_type balancer(balancer_actor::stateful_pointer<balancer_state> self,
                                       balancer_params params) {
  self->state.params = params;
  return {
    [self](balance_atom, std::vector<gen_worker>& workers) {
      auto& st = self->state;
      ++st.ticks;
      const auto cooldown = uint64_t(std::max(0, st.params.cooldown_ticks));
      std::erase_if(st.moved_at, [&](auto& e) { return e.second + cooldown <= st.ticks; });
      for (auto& w : workers)
        for (auto* queue : {&w.running, &w.waiting})
          for (auto& r : *queue)
            r.pinned = r.pinned || st.moved_at.count(r.id) > 0;
      auto moves = plan_migrations(workers, st.params);
      for (auto& m : moves)
        st.moved_at[m.request] = st.ticks;
      st.migrations += moves.size();
      if (!moves.empty())
        spdlog::debug("event=gen_balanced tick={} workers={} migrations={}", st.ticks,
                      workers.size(), moves.size());
      return moves;
    },
  };
}

} // namespace loom
