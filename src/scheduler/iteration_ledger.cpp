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
    m.longest_rollout_s = std::max(m.longest_rollout_s, elapsed_s);
  else if (phase == phase_kind::training) // as the job's own DP would take it (footnote 2)
    m.longest_training_s = std::max(m.longest_training_s,
                                    elapsed_s * training_gpus_
                                      / std::max(1, m.member.job.training_gpus));
}

void iteration_ledger::footprint(const std::string& job, phase_kind phase, double gb) {
  auto it = members_.find(job);
  if (it == members_.end())
    return;
  auto& m = it->second;
  double& kept = phase == phase_kind::rollout ? m.rollout_memory_gb : m.training_memory_gb;
  kept = std::max(kept, gb); // sync holds the trainer's state: counted as training's
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
    m.longest_rollout_s = std::max(m.longest_rollout_s, solo_s);
  else if (phase == phase_kind::training)
    m.longest_training_s = std::max(m.longest_training_s, solo_s);
  if (phase != phase_kind::sync)
    return std::nullopt;
  const auto& spec = m.member.job;
  if (spec.profile) {
    iteration_end end;
    end.profiled = job_profile{job, m.longest_rollout_s, m.longest_training_s,
                               m.rollout_memory_gb, m.training_memory_gb};
    members_.erase(it);
    return end;
  }
  // The SLO is a slowdown over the job alone (§4.2): against its profile, or against the work
  // it measured when that outgrew the profile (drift is the job's own, not its group's).
  iteration_end end{{job, group_, m.iteration, now_ns, double(now_ns - m.since_ns) / 1e9,
                     m.solo_s, std::max(spec.solo_s(), m.solo_s), spec.slo},
                    false, std::nullopt};
  m.since_ns = now_ns;
  m.solo_s = 0;
  ++m.iteration;
  end.completed = spec.iterations > 0 && m.iteration >= spec.iterations;
  if (end.completed)
    members_.erase(it);
  return end;
}

namespace {

/// A member as its measured phases have shown it: never below its profile.
planned_phases measured_plan(const member_progress& m, int group_training_gpus) {
  const auto& job = m.member.job;
  const double scale = double(job.training_gpus) / std::max(1, group_training_gpus);
  return {m.member.rollout_nodes, std::max(job.rollout_s, m.longest_rollout_s),
          std::max(job.training_s, m.longest_training_s) * scale, job.sync_s};
}

/// Rollout plus training as measured, at the job's own DP, never below its profile.
double measured_work(const member_progress& m) {
  const auto& job = m.member.job;
  return std::max(job.rollout_s, m.longest_rollout_s)
         + std::max(job.training_s, m.longest_training_s);
}

double growth(const member_progress& m) {
  const auto& job = m.member.job;
  return measured_work(m) / std::max(1e-9, job.rollout_s + job.training_s);
}

/// Some member's steady-state iteration, at the measured phases, is past its SLO over its
/// measured solo time.
bool breaks_an_slo(const std::vector<planned_phases>& measured,
                   const std::vector<const member_progress*>& who) {
  auto times = meta_iteration_times(measured);
  for (size_t k = 0; k < who.size(); ++k) {
    const auto& job = who[k]->member.job;
    if (!within_slo(times[k], job.slo, measured_work(*who[k]) + job.sync_s))
      return true;
  }
  return false;
}

} // namespace

std::optional<drift_report> iteration_ledger::drift_victim(double margin) {
  member_progress* worst = nullptr;
  double worst_growth = 1 + margin;
  for (auto& [id, m] : members_) {
    if (m.drift_reported || m.member.job.profile) // a profile has no worst case to outgrow
      continue;
    if (double g = growth(m); g > worst_growth) {
      worst_growth = g;
      worst = &m;
    }
  }
  if (!worst)
    return std::nullopt; // nothing outgrew its profile by more than the margin
  std::vector<planned_phases> measured;
  std::vector<const member_progress*> who;
  for (auto& [id, m] : members_) {
    measured.push_back(measured_plan(m, training_gpus_));
    who.push_back(&m);
  }
  if (!saturated(measured) && !breaks_an_slo(measured, who))
    return std::nullopt;
  worst->drift_reported = true;
  const auto& job = worst->member.job;
  return drift_report{job.id, std::max(job.rollout_s, worst->longest_rollout_s),
                      std::max(job.training_s, worst->longest_training_s), worst->iteration};
}

} // namespace loom
