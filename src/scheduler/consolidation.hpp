#pragma once
// Consolidation, beyond WEAVE (which never regroups, §6.6): when a departure leaves a group
// under-used, its members are placed again through Algorithm 1 as if they had just arrived:
// into other groups' slack, or into a group sized to them, which also shrinks a training pool
// sized by a job that has left. Worth it only if the $/h saved over the moved jobs' expected
// remaining lifetime beats what their restarts cost. Plain code over the placement engine:
// tried there and undone, with the admissions the scheduler will then make.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "scheduler/placement.hpp"

namespace loom {

/// What the scheduler knows of a member it might move.
struct member_outlook {
  double remaining_s = 0; // expected time left to run (its iterations left x its iteration)
  double restart_s = 0;   // what a move costs it: the cold start and the interrupted iteration
};

struct regrouping {
  uint64_t group = 0;
  std::vector<rl_job> moves;        // the members, in turn order, to admit again
  double saving_per_hour = 0;       // the cluster's $/h before minus after
  double horizon_h = 0;             // how long the saving lasts: the shortest remaining life
  double restart_cost = 0;          // $ the moved jobs' restarts hold their share of GPUs for
  bool worthwhile() const { return !moves.empty() && saving_per_hour * horizon_h > restart_cost; }
};

/// The regrouping of `group`'s members (`outlook` keyed by job id; a member without one is
/// never moved), or an empty one if some member would not be placed again or nothing is
/// saved. The engine is left as it was.
regrouping plan_regrouping(placement_engine& engine, uint64_t group,
                           const std::map<std::string, member_outlook>& outlook);

} // namespace loom
