#pragma once
// What a restarted scheduler takes back from the store, pure: every acknowledged decision as it
// was, not decided again. Groups keep their ids, nodes and members in turn order; members keep
// their rollout nodes and, when recorded, their place in the round robin and their iteration
// count (WEAVE §4.3). Drifted jobs (stopped to be placed again when the service went down) and
// placed jobs whose records do not fit together are admitted again; ended jobs are listed.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "records/codecs.hpp"
#include "types/scheduler.hpp"
#include "types/store.hpp"

namespace loom {

/// The scheduler's column families as read back (undecoded).
struct stored_schedule {
  std::vector<stored_record> jobs;
  std::vector<stored_record> groups;
  std::vector<stored_record> placements;
  std::vector<stored_record> progress;
  std::string meta; // the "scheduler" record of column family "meta", empty if none
};

struct restored_group {
  uint64_t id = 0;
  std::vector<int> rollout_nodes;  // rollout-pool indices, in the group's order
  std::vector<int> training_nodes;
  std::vector<group_member> members; // in turn order
};

struct restore_plan {
  std::vector<restored_group> groups;
  std::map<std::string, job_progress> progress; // of members, recorded in their group
  std::vector<rl_job> readmit;                  // to go through admission again
  std::vector<job_record> ended;                // finished, failed, rejected, cancelled
  std::vector<std::string> problems;            // records that did not fit, in words
  uint64_t next_group = 1;
  std::map<std::string, std::string> failed_nodes; // out of service: why
};

/// Rebuilds the schedule from its records; `rollout_pool` and `training_pool` name the nodes by
/// index, as the placement engine numbers them.
restore_plan plan_restore(const stored_schedule& stored,
                          const std::vector<std::string>& rollout_pool,
                          const std::vector<std::string>& training_pool);

/// "g12" -> 12; 0 if it is not a group id.
uint64_t group_number(const std::string& group_id);

} // namespace loom
