// The fabric controller's Opus rails (Opus §4.1-4.2): per job a rail_orchestrator decides; this
// applies its transitions on the job's rail OCS, persists each, and answers the writers.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "fabric/controller_steps.hpp"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "records/codecs.hpp"
#include "store/persist.hpp"

namespace loom::controller_steps {

namespace {

using opus_state = fabric_controller_state::opus_state;

void deliver(opus_state& op, const std::vector<rail_acks>& acks) {
  for (auto& group : acks)
    for (auto token : group.writers)
      if (auto it = op.answers.find(token); it != op.answers.end()) {
        it->second.deliver(group.ack);
        op.answers.erase(it);
      }
}

void fail(opus_state& op, const std::vector<rail_acks>& acks, const caf::error& err) {
  for (auto& group : acks)
    for (auto token : group.writers)
      if (auto it = op.answers.find(token); it != op.answers.end()) {
        it->second.deliver(err);
        op.answers.erase(it);
      }
}

/// The job's opus_jobs record: what it registered and the topology its rails carry now.
write_batch job_record(self_ptr self, const opus_state& op) {
  write_batch batch;
  batch.sync = self->state.config.sync_writes;
  batch.records.push_back({record_kind::opus_jobs, op.spec.job,
                           encode_opus_job({op.spec, op.orchestrator->current().str()}), false});
  return batch;
}

/// A diff per rail of the job.
template <class Diff>
std::map<uint32_t, xc_diff> per_rail(self_ptr self, const opus_state& op, Diff diff_for) {
  std::map<uint32_t, xc_diff> diffs;
  for (auto dev : op.rails)
    diffs[dev] = diff_for(self->state.model->devices[dev].ports);
  return diffs;
}

void run_rails(self_ptr self, const std::string& job);

/// The transition's apply finished: retried, confirmed, or the giant ring; then durable, then
/// its writers (and the O1 writers behind it) are answered.
void transition_applied(self_ptr self, const std::string& job, const topo_transition& t,
                        const apply_outcome& out) {
  auto& op = self->state.opus.at(job);
  auto r = op.orchestrator->finish(!out.error);
  if (r.retry) {
    spdlog::warn("event=opus_retry job={} attempt={} error=\"{}\"", job, r.attempts,
                 *out.error);
    run_rails(self, job);
    return;
  }
  std::string stages;
  for (int s : t.reprogram)
    stages += fmt::format("{}{}", stages.empty() ? "" : ",", s);
  loom_event event{event_kind::opus_reconfigured, job,
                   fmt::format("from={} to={} stages={}", t.from.str(), t.to.str(), stages)};
  if (r.fell_back) {
    // Persistent failure (Opus §4.2): a static giant ring over every rank of each rail.
    event = {event_kind::opus_fallback, job,
             fmt::format("attempts={} error=\"{}\"", r.attempts, *out.error)};
    apply_all(self, per_rail(self, op, [&](uint32_t p) { return op.orchestrator->giant_ring_diff(p); }),
              [job](apply_outcome ring) {
                if (ring.error)
                  spdlog::error("event=opus_fallback_failed job={} error=\"{}\"", job,
                                *ring.error);
              });
  }
  persist(
    self, self->state.store, job_record(self, op), std::move(event),
    [self, job, acks = r.acks] {
      deliver(self->state.opus.at(job), acks);
      run_rails(self, job);
    },
    [self, job, acks = r.acks](caf::error err) {
      fail(self->state.opus.at(job), acks, err);
      run_rails(self, job);
    });
}

/// Applies the orchestrator's next transition, if it has one to start.
void run_rails(self_ptr self, const std::string& job) {
  auto& op = self->state.opus.at(job);
  auto* next = op.orchestrator->start();
  if (!next)
    return;
  auto t = *next;
  apply_all(self, per_rail(self, op, [&](uint32_t p) { return op.orchestrator->diff(t, p); }),
            [self, job, t](apply_outcome out) { transition_applied(self, job, t, out); });
}

/// Why the job cannot run on these rails, or nothing.
std::optional<std::string> invalid_job(self_ptr self, const opus_job& job) {
  auto& model = *self->state.model;
  if (job.pp < 1 || job.initial.size() != size_t(job.pp)
      || job.initial.find_first_not_of("0123456789") != std::string::npos)
    return fmt::format("job '{}': initial topo_id '{}' needs {} digits", job.job, job.initial,
                       job.pp);
  for (int degree : job.symmetrical)
    if (degree < 1)
      return fmt::format("job '{}': a symmetrical degree must be at least 1", job.job);
  for (auto& t : job.traces)
    if (t.stage < 0 || t.stage >= job.pp || t.digits.empty()
        || std::any_of(t.digits.begin(), t.digits.end(), [&](int d) {
             return d < 0 || size_t(d) > job.symmetrical.size();
           }))
      return fmt::format("job '{}': the trace of stage {} needs operations with digits 0..{}",
                         job.job, t.stage, job.symmetrical.size());
  const int ranks = opus_layout{job.pp, job.symmetrical}.ranks();
  for (auto& r : job.rails) {
    auto dev = model.device_index(r);
    if (!dev || model.devices[*dev].tier != ocs_tier::rail)
      return fmt::format("'{}' is not a rail OCS", r);
    if (model.devices[*dev].ports < uint32_t(ranks))
      return fmt::format("rail '{}' has {} ports for {} ranks", r, model.devices[*dev].ports,
                         ranks);
  }
  return std::nullopt;
}

/// Opus §4.2 profiling: each traced stage's phases, runs of operations that need one digit.
size_t learn(opus_state& op, const std::vector<opus_trace>& traces) {
  size_t phases = 0;
  for (auto& t : traces) {
    std::vector<traced_op> ops;
    for (int d : t.digits)
      ops.push_back({d, 0});
    auto& table = op.phases[t.stage];
    table.clear();
    for (auto& p : learn_phases(ops))
      table.push_back({t.stage, p.dim, uint32_t(p.first), uint32_t(p.last)});
    phases += table.size();
  }
  return phases;
}

opus_registration registration(const opus_state& op) {
  opus_registration r{op.orchestrator->current().str(), {}};
  for (auto& [stage, table] : op.phases)
    r.phases.insert(r.phases.end(), table.begin(), table.end());
  return r;
}

/// The job registered again: the same layout keeps what runs, and its traces (if any) give the
/// phase table, durable before it is answered.
caf::result<opus_registration> register_again(self_ptr self, opus_state& op, const opus_job& job) {
  const auto& layout = op.orchestrator->layout();
  if (layout.pp != job.pp || layout.symmetrical != job.symmetrical)
    return make_error(errc::conflict,
                      fmt::format("Opus job '{}' runs with another layout", job.job));
  if (job.traces.empty())
    return registration(op);
  const auto phases = learn(op, job.traces);
  op.spec.traces = job.traces;
  auto promise = self->make_response_promise<opus_registration>();
  persist_and_deliver(self, self->state.store, job_record(self, op),
                      {event_kind::opus_profiled, job.job,
                       fmt::format("stages={} phases={}", job.traces.size(), phases)},
                      promise, registration(op));
  return promise;
}

} // namespace

caf::result<opus_registration> register_opus(self_ptr self, const opus_job& job) {
  auto& st = self->state;
  if (auto why = invalid_job(self, job))
    return make_error(errc::invalid_argument, *why);
  if (auto it = st.opus.find(job.job); it != st.opus.end())
    return register_again(self, it->second, job); // e.g. a shim restarted, or profiled
  opus_state op;
  op.spec = job;
  for (auto& r : job.rails)
    op.rails.push_back(*st.model->device_index(r));
  op.orchestrator.emplace(opus_layout{job.pp, job.symmetrical}, topo_id::parse(job.initial),
                          st.config.max_retries);
  const auto phases = learn(op, job.traces);
  // Program the starting topology on every rail, then answer.
  std::map<uint32_t, xc_diff> diffs;
  for (auto dev : op.rails)
    diffs[dev].adds = op.orchestrator->mapping(st.model->devices[dev].ports);
  st.opus[job.job] = std::move(op);
  auto promise = self->make_response_promise<opus_registration>();
  apply_all(self, diffs, [self, promise, job, phases](apply_outcome out) mutable {
    if (out.error) {
      self->state.opus.erase(job.job);
      promise.deliver(make_error(errc::driver_refused, *out.error));
      return;
    }
    persist_and_deliver(self, self->state.store, job_record(self, self->state.opus.at(job.job)),
                        {event_kind::opus_registered, job.job,
                         fmt::format("topo_id={} rails={} phases={}", job.initial,
                                     job.rails.size(), phases)},
                        promise, registration(self->state.opus.at(job.job)));
  });
  return promise;
}

void restore_opus(self_ptr self, const std::vector<stored_record>& restored) {
  auto& st = self->state;
  for (auto& r : restored) {
    auto rec = decode_opus_job(r.value);
    auto now = rec ? std::optional{rec->job} : std::nullopt;
    if (now)
      now->initial = rec->topo; // the stored topology must fit the job as its start would
    if (!now || invalid_job(self, *now)) {
      spdlog::warn("event=opus_restore_skipped job={}", r.key);
      continue;
    }
    opus_state op;
    op.spec = rec->job;
    for (auto& rail : rec->job.rails)
      op.rails.push_back(*st.model->device_index(rail));
    op.orchestrator.emplace(opus_layout{rec->job.pp, rec->job.symmetrical},
                            topo_id::parse(rec->topo), st.config.max_retries);
    const auto phases = learn(op, rec->job.traces);
    spdlog::info("event=opus_restored job={} topo_id={} phases={}", r.key, rec->topo, phases);
    st.opus[r.key] = std::move(op);
  }
}

caf::result<topo_ack> topo_write_to(self_ptr self, const std::string& job, const topo_write& w) {
  auto& st = self->state;
  auto it = st.opus.find(job);
  if (it == st.opus.end())
    return make_error(errc::not_found, fmt::format("no Opus job '{}'", job));
  auto& op = it->second;
  const auto& layout = op.orchestrator->layout();
  if (w.stage < 0 || w.stage >= layout.pp || w.digit > layout.symmetrical.size()
      || w.group_size < 1)
    return make_error(errc::invalid_argument,
                      fmt::format("topo_write of '{}': stage {} digit {} group size {}", job,
                                  w.stage, int(w.digit), w.group_size));
  auto promise = self->make_response_promise<topo_ack>();
  const auto token = st.next_writer++;
  op.answers.emplace(token, promise);
  deliver(op, op.orchestrator->write(w, token).acks);
  run_rails(self, job);
  return promise;
}

} // namespace loom::controller_steps
