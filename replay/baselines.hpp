#pragma once
// The placement baselines WEAVE is compared with (§6.4, §6.5), as choosers for the same
// cluster_scheduler: Solo-D gives every job dedicated pools; Random puts it in a random group
// that can host it (or a new one) on random nodes; Greedy (most-idle) picks the group with the
// most idle time and its least loaded nodes. Neither checks SLOs or saturation.

#include <cstdint>

#include "scheduler/cluster_scheduler.hpp"

namespace loom::replay {

placement_chooser solo_chooser();
placement_chooser random_chooser(uint64_t seed);
placement_chooser greedy_chooser();

} // namespace loom::replay
