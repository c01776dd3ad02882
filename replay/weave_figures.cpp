#include "replay/weave_figures.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "replay/report.hpp"

namespace loom::replay {

ordered_json weave_series(const std::vector<cluster_record>& cluster,
                          const std::vector<iteration_record>& iterations, double start) {
  ordered_json t = ordered_json::array(), cost = ordered_json::array(),
               rollout = ordered_json::array(), train = ordered_json::array();
  for (auto& r : cluster) {
    t.push_back(round4((seconds_of(r.time_ns) - start) / 3600));
    cost.push_back(round4(r.cost_per_hour));
    rollout.push_back(r.rollout_gpus);
    train.push_back(r.training_gpus);
  }
  // The first iteration after an admission is a cold start, not steady state (WEAVE §4.2).
  std::map<std::string, std::pair<double, double>> worst; // job -> (slowdown, SLO)
  for (auto& it : iterations) {
    if (it.index == 0 || it.planned_solo_s <= 0)
      continue;
    auto& [slowdown, slo] = worst[it.job];
    slowdown = std::max(slowdown, it.duration_s / it.planned_solo_s);
    slo = it.slo;
  }
  ordered_json ids = ordered_json::array(), slowdowns = ordered_json::array(),
               slos = ordered_json::array();
  for (auto& [job, w] : worst) {
    ids.push_back(job);
    slowdowns.push_back(round4(w.first));
    slos.push_back(round4(w.second));
  }
  return {{"timeline", {{"t_h", t}, {"cost_per_hour", cost}, {"rollout_gpus", rollout},
                        {"train_gpus", train}}},
          {"jobs", {{"id", ids}, {"worst_slowdown", slowdowns}, {"slo", slos}}}};
}

namespace {

/// The group with the most distinct members (the first by name on a tie).
std::string busiest_group(const std::vector<activity_span>& activities) {
  std::map<std::string, std::set<std::string>> members;
  for (auto& a : activities)
    if (!a.group.empty())
      members[a.group].insert(a.job);
  std::string best;
  size_t most = 0;
  for (auto& [group, jobs] : members)
    if (jobs.size() > most) {
      most = jobs.size();
      best = group;
    }
  return best;
}

} // namespace

ordered_json group_gantt(const std::vector<activity_span>& activities) {
  const std::string group = busiest_group(activities);
  if (group.empty())
    return nullptr;
  std::vector<const activity_span*> mine;
  for (auto& a : activities)
    if (a.group == group)
      mine.push_back(&a);
  // From the second member's first activity: the group as a group, not one job alone.
  std::set<std::string> seen;
  double from = mine.front()->start_s;
  for (auto* a : mine)
    if (seen.insert(a->job).second && seen.size() == 2) {
      from = a->start_s;
      break;
    }
  ordered_json rows = ordered_json::array();
  std::set<std::string> shown;
  for (auto* a : mine) {
    if (a->start_s < from || rows.size() == gantt_max_activities)
      continue;
    shown.insert(a->job);
    const double end = a->end_s < 0 ? a->start_s : a->end_s; // still running at the end
    rows.push_back({a->job, std::string{to_string(a->kind)}, round4(a->start_s - from),
                    round4(end - from), a->gpus});
  }
  return {{"group", group},
          {"members", int64_t(shown.size())},
          {"columns", {"job", "activity", "start_s", "end_s", "gpus"}},
          {"activities", rows}};
}

} // namespace loom::replay
