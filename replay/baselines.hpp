#pragma once
// The placement baselines WEAVE is compared with (§6.4, §6.5), as choosers for the same
// cluster_scheduler: Solo-D gives every job dedicated pools; Random puts it in a random group
// that can host it (or a new one) on random nodes; Greedy (most-idle) picks the group with the
// most idle time and its least loaded nodes. Neither checks SLOs or saturation, as in the
// paper; their SLO-feasible variants take only placements that meet every member's SLO by
// Algorithm 1's own check (line 10), so that their costs compare with WEAVE's.

#include <cstdint>

#include "scheduler/cluster_scheduler.hpp"

namespace loom::replay {

placement_chooser solo_chooser();
placement_chooser random_chooser(uint64_t seed, bool slo_feasible = false);
placement_chooser greedy_chooser(bool slo_feasible = false);

} // namespace loom::replay
