#include "scheduler/iteration_ledger.hpp"

#include <algorithm>
#include <vector>

#include "scheduler/meta_iteration.hpp"

namespace loom {

iteration_ledger::iteration_ledger(std::string group, int training_gpus)
  : group_(std::move(group)), training_gpus_(training_gpus) {}

void iteration_ledger::join(const group_member& m, int64_t now_ns, int64_t iterations_done) {
  member_progress p{m, now_ns};
  p.iteration = iterations_done;
  members_[m.job.id] = std::move(p);
}

void iteration_ledger::overran(const std::string& job, phase_kind phase, double elapsed_s) {
  auto it = members_.find(job);
  if (it == members_.end())
    return;
  auto& m = it->second;
  ++m.overruns;
  if (phase == phase_kind::rollout)
    m.measured_rollout_s = std::max(m.measured_rollout_s, elapsed_s);
  else if (phase == phase_kind::training) // as the job's own DP would take it (footnote 2)
    m.measured_training_s = std::max(m.measured_training_s,
                                     elapsed_s * training_gpus_
                                       / std::max(1, m.member.job.training_gpus));
}

bool iteration_ledger::leave(const std::string& job) {
  return members_.erase(job) > 0;
}

const member_progress* iteration_ledger::find(const std::string& job) const {
  auto it = members_.find(job);
  return it == members_.end() ? nullptr : &it->second;
}

std::optional<iteration_end> iteration_ledger::phase_done(const std::string& job,
                                                          phase_kind phase, double solo_s,
                                                          int64_t now_ns) {
  auto it = members_.find(job);
  if (it == members_.end())
    return std::nullopt;
  auto& m = it->second;
  m.solo_s += solo_s;
  if (phase == phase_kind::rollout)
    m.measured_rollout_s = solo_s;
  else if (phase == phase_kind::training)
    m.measured_training_s = solo_s;
  if (phase != phase_kind::sync)
    return std::nullopt;
  const auto& spec = m.member.job;
  iteration_end end{{job, group_, m.iteration, now_ns, double(now_ns - m.since_ns) / 1e9,
                     m.solo_s, spec.solo_s(), spec.slo},
                    false};
  m.since_ns = now_ns;
  m.solo_s = 0;
  ++m.iteration;
  end.completed = spec.iterations > 0 && m.iteration >= spec.iterations;
  if (end.completed)
    members_.erase(it);
  return end;
}

std::optional<drift_report> iteration_ledger::drift_victim() {
  std::vector<planned_phases> measured;
  member_progress* worst = nullptr;
  double worst_ratio = 1.0;
  for (auto& [id, m] : members_) {
    const auto& job = m.member.job;
    double roll = std::max(job.rollout_s, m.measured_rollout_s);
    double train = std::max(job.training_s, m.measured_training_s);
    double scale = double(job.training_gpus) / std::max(1, training_gpus_);
    measured.push_back({m.member.rollout_nodes, roll, train * scale, job.sync_s});
    double ratio = (roll + train) / (job.rollout_s + job.training_s);
    if (ratio > worst_ratio && !m.drift_reported) {
      worst_ratio = ratio;
      worst = &m;
    }
  }
  if (!worst || !saturated(measured))
    return std::nullopt;
  worst->drift_reported = true;
  const auto& job = worst->member.job;
  return drift_report{job.id, std::max(job.rollout_s, worst->measured_rollout_s),
                      std::max(job.training_s, worst->measured_training_s), worst->iteration};
}

} // namespace loom
