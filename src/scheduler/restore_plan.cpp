#include "scheduler/restore_plan.hpp"

#include <charconv>
#include <optional>

#include <fmt/format.h>

namespace loom {

uint64_t group_number(const std::string& group_id) {
  uint64_t n = 0;
  if (group_id.size() < 2 || group_id[0] != 'g')
    return 0;
  auto [end, ec] = std::from_chars(group_id.data() + 1, group_id.data() + group_id.size(), n);
  return ec == std::errc{} && end == group_id.data() + group_id.size() ? n : 0;
}

namespace {

std::optional<std::vector<int>> indices_of(const std::vector<std::string>& names,
                                           const std::map<std::string, int>& index) {
  std::vector<int> out;
  for (auto& n : names) {
    auto it = index.find(n);
    if (it == index.end())
      return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

std::map<std::string, int> index_of(const std::vector<std::string>& pool) {
  std::map<std::string, int> out;
  for (size_t i = 0; i < pool.size(); ++i)
    out[pool[i]] = int(i);
  return out;
}

template <class Record, class Decode>
std::map<std::string, Record> decode_all(const std::vector<stored_record>& records,
                                         Decode decode, const char* what,
                                         std::vector<std::string>& problems) {
  std::map<std::string, Record> out;
  for (auto& r : records) {
    auto rec = decode(r.value);
    if (rec)
      out.emplace(r.key, std::move(*rec));
    else
      problems.push_back(fmt::format("{} record '{}' cannot be read", what, r.key));
  }
  return out;
}

/// One stored group with its members' jobs and placements, or why not.
std::optional<restored_group> rebuild(const group_record& g,
                                      std::map<std::string, job_record>& placed,
                                      const std::map<std::string, placement_record>& placements,
                                      const std::map<std::string, int>& rollout_index,
                                      const std::map<std::string, int>& training_index,
                                      std::vector<std::string>& problems) {
  restored_group out;
  out.id = group_number(g.id);
  auto roll = indices_of(g.rollout_nodes, rollout_index);
  auto train = indices_of(g.training_nodes, training_index);
  if (out.id == 0 || !roll || !train) {
    problems.push_back(fmt::format("group '{}' names a node this cluster does not have", g.id));
    return std::nullopt;
  }
  out.rollout_nodes = std::move(*roll);
  out.training_nodes = std::move(*train);
  for (auto& job : g.jobs) {
    auto j = placed.find(job);
    auto p = placements.find(job);
    if (j == placed.end() || j->second.group != g.id || p == placements.end()) {
      problems.push_back(fmt::format("group '{}' lists job '{}' without its placement", g.id, job));
      continue;
    }
    std::vector<std::string> nodes;
    for (auto& share : p->second.rollout)
      nodes.push_back(share.node);
    auto idx = indices_of(nodes, rollout_index);
    if (!idx) {
      problems.push_back(fmt::format("job '{}' is placed on an unknown rollout node", job));
      continue;
    }
    out.members.push_back({j->second.job, std::move(*idx)});
    placed.erase(j);
  }
  if (out.members.empty())
    return std::nullopt;
  return out;
}

} // namespace

restore_plan plan_restore(const stored_schedule& stored,
                          const std::vector<std::string>& rollout_pool,
                          const std::vector<std::string>& training_pool) {
  restore_plan plan;
  auto jobs = decode_all<job_record>(stored.jobs, decode_job, "job", plan.problems);
  auto groups = decode_all<group_record>(stored.groups, decode_group, "group", plan.problems);
  auto placements =
    decode_all<placement_record>(stored.placements, decode_placement, "placement", plan.problems);
  auto progress = decode_all<job_progress>(stored.progress, decode_progress, "progress",
                                           plan.problems);
  if (auto meta = decode_scheduler_meta(stored.meta); meta && !stored.meta.empty()) {
    plan.next_group = std::max<uint64_t>(1, meta->next_group);
    plan.failed_nodes = std::move(meta->failed_nodes);
  }
  std::map<std::string, job_record> placed;
  for (auto& [key, rec] : jobs) {
    if (rec.state == job_state::placed)
      placed.emplace(rec.job.id, rec);
    else if (placed_again(rec.state)) // moved before the restart: it goes on from its count
      plan.readmit.push_back(rec.job.continued(rec.iterations_done - rec.job.iterations_before));
    else
      plan.ended.push_back(rec);
  }
  const auto rollout_index = index_of(rollout_pool);
  const auto training_index = index_of(training_pool);
  for (auto& [key, g] : groups) {
    auto group = rebuild(g, placed, placements, rollout_index, training_index, plan.problems);
    if (!group)
      continue;
    plan.next_group = std::max(plan.next_group, group->id + 1);
    for (auto& m : group->members)
      if (auto p = progress.find(m.job.id); p != progress.end() && p->second.group == g.id)
        plan.progress.emplace(m.job.id, p->second);
    plan.groups.push_back(std::move(*group));
  }
  for (auto& [id, rec] : placed) { // placed, but in no group that could be rebuilt
    plan.problems.push_back(fmt::format("job '{}' is placed in '{}', which could not be rebuilt",
                                        id, rec.group));
    plan.readmit.push_back(rec.job);
  }
  return plan;
}

} // namespace loom
