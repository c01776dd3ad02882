#include "scheduler/restore_plan.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>
#include <unordered_map>

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

// Names by index, looked up by name: a restart at cluster scale (#49: 100,000 jobs) reads every
// record once, so lookups are hashed and records are decoded in place, in key order.
using node_index = std::unordered_map<std::string_view, int>;

template <class Record>
using keyed = std::vector<std::pair<std::string, Record>>;

template <class Record>
using by_key = std::unordered_map<std::string_view, Record*>;

std::optional<std::vector<int>> indices_of(const std::vector<std::string>& names,
                                           const node_index& index) {
  std::vector<int> out;
  out.reserve(names.size());
  for (auto& n : names) {
    auto it = index.find(n);
    if (it == index.end())
      return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

/// A member's rollout nodes by index: they are its group's (`names`, at `indices`), so they are
/// found among those first and hashed only if not; nothing if one is unknown.
std::optional<std::vector<int>> member_indices(const std::vector<node_share>& shares,
                                               const std::vector<std::string>& names,
                                               const std::vector<int>& indices,
                                               const node_index& index) {
  std::vector<int> out;
  out.reserve(shares.size());
  for (auto& share : shares) {
    auto in_group = std::find(names.begin(), names.end(), share.node);
    if (in_group != names.end()) {
      out.push_back(indices[size_t(in_group - names.begin())]);
    } else if (auto it = index.find(share.node); it != index.end()) {
      out.push_back(it->second);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

node_index index_of(const std::vector<std::string>& pool) {
  node_index out;
  out.reserve(pool.size());
  for (size_t i = 0; i < pool.size(); ++i)
    out.emplace(pool[i], int(i));
  return out;
}

/// Every record that decodes, in key order (a scan's order; sorted here if it was not).
template <class Record, class Decode>
keyed<Record> decode_all(const std::vector<stored_record>& records, Decode decode,
                         const char* what, std::vector<std::string>& problems) {
  keyed<Record> out;
  out.reserve(records.size());
  for (auto& r : records) {
    auto rec = decode(r.value);
    if (rec)
      out.emplace_back(r.key, std::move(*rec));
    else
      problems.push_back(fmt::format("{} record '{}' cannot be read", what, r.key));
  }
  auto key_less = [](auto& a, auto& b) { return a.first < b.first; };
  if (!std::is_sorted(out.begin(), out.end(), key_less))
    std::stable_sort(out.begin(), out.end(), key_less);
  return out;
}

template <class Record>
by_key<Record> lookup(keyed<Record>& records) {
  by_key<Record> out;
  out.reserve(records.size());
  for (auto& [key, rec] : records)
    out.emplace(key, &rec);
  return out;
}

template <class Record>
Record* find(const by_key<Record>& index, const std::string& key) {
  auto it = index.find(key);
  return it == index.end() ? nullptr : it->second;
}

/// One stored group with its members' jobs and placements, or why not. A member taken into
/// it leaves `placed`.
std::optional<restored_group> rebuild(const group_record& g, by_key<job_record>& placed,
                                      const by_key<placement_record>& placements,
                                      const node_index& rollout_index,
                                      const node_index& training_index,
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
    auto* p = find(placements, job);
    if (j == placed.end() || j->second->group != g.id || !p) {
      problems.push_back(fmt::format("group '{}' lists job '{}' without its placement", g.id, job));
      continue;
    }
    auto idx = member_indices(p->rollout, g.rollout_nodes, out.rollout_nodes, rollout_index);
    if (!idx) {
      problems.push_back(fmt::format("job '{}' is placed on an unknown rollout node", job));
      continue;
    }
    auto* rec = j->second;
    placed.erase(j);
    out.members.push_back({std::move(rec->job), std::move(*idx)});
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
  by_key<job_record> placed; // by job id, until a group takes it
  placed.reserve(jobs.size());
  for (auto& [key, rec] : jobs) {
    if (rec.state == job_state::placed)
      placed.emplace(rec.job.id, &rec);
    else if (placed_again(rec.state)) // moved before the restart: it goes on from its count
      plan.readmit.push_back(rec.job.continued(rec.iterations_done - rec.job.iterations_before));
    else
      plan.ended.push_back(std::move(rec));
  }
  const auto placement_of = lookup(placements); // both keyed by job id
  const auto progress_of = lookup(progress);
  const auto rollout_index = groups.empty() ? node_index{} : index_of(rollout_pool);
  const auto training_index = groups.empty() ? node_index{} : index_of(training_pool);
  for (auto& [key, g] : groups) {
    auto group = rebuild(g, placed, placement_of, rollout_index, training_index, plan.problems);
    if (!group)
      continue;
    plan.next_group = std::max(plan.next_group, group->id + 1);
    for (auto& m : group->members)
      if (auto* p = find(progress_of, m.job.id); p && p->group == g.id)
        plan.progress.emplace(m.job.id, *p);
    plan.groups.push_back(std::move(*group));
  }
  for (auto& [key, rec] : jobs) { // placed, but in no group that could be rebuilt
    if (rec.state != job_state::placed || find(placed, rec.job.id) != &rec)
      continue;
    plan.problems.push_back(fmt::format("job '{}' is placed in '{}', which could not be rebuilt",
                                        rec.job.id, rec.group));
    plan.readmit.push_back(rec.job);
  }
  return plan;
}

} // namespace loom
