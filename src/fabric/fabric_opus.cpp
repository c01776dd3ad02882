// The fabric controller's Opus rails (Opus §4.1-4.2): per job a rail_orchestrator decides; this
// applies its transitions on the job's rail OCS, persists each, and answers the writers.

#include <caf/all.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <variant>

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

void end_now(self_ptr self, const std::string& job);

/// Applies the orchestrator's next transition, if it has one to start; a job that is ending
/// ends once no transition is being applied.
void run_rails(self_ptr self, const std::string& job) {
  auto& op = self->state.opus.at(job);
  if (op.ending) {
    if (!op.orchestrator->applying())
      end_now(self, job);
    return;
  }
  auto* next = op.orchestrator->start();
  if (!next)
    return;
  auto t = *next;
  apply_all(self, per_rail(self, op, [&](uint32_t p) { return op.orchestrator->diff(t, p); }),
            [self, job, t](apply_outcome out) { transition_applied(self, job, t, out); });
}

/// Opus §7: the job's circuits leave its rails (the giant ring too, if it fell back), its
/// record goes, durably, and then its ports are free: writers still waiting hear it ended.
void end_now(self_ptr self, const std::string& job) {
  auto& op = self->state.opus.at(job);
  auto diffs = per_rail(self, op, [&](uint32_t p) {
    xc_diff d;
    d.removes = op.orchestrator->carried(p);
    return d;
  });
  apply_all(self, diffs, [self, job](apply_outcome out) {
    auto& op = self->state.opus.at(job);
    if (out.error) { // the job stays, on its rails as they are: ending it may be tried again
      op.ending->deliver(make_error(errc::driver_refused, *out.error));
      op.ending.reset();
      run_rails(self, job);
      return;
    }
    write_batch batch;
    batch.sync = self->state.config.sync_writes;
    batch.records.push_back({record_kind::opus_jobs, job, {}, true});
    const auto ports = fmt::format("ports={}-{}", op.orchestrator->first_port(),
                                   op.orchestrator->first_port()
                                     + op.orchestrator->layout().ranks() - 1);
    persist(
      self, self->state.store, std::move(batch),
      {event_kind::opus_ended, job, fmt::format("{} rails={}", ports, op.rails.size())},
      [self, job] {
        auto& op = self->state.opus.at(job);
        auto promise = *op.ending;
        for (auto& [token, answer] : op.answers)
          answer.deliver(make_error(errc::job_ended, fmt::format("Opus job '{}' ended", job)));
        self->state.opus.erase(job);
        promise.deliver(ok_atom::value);
      },
      [self, job](caf::error err) {
        auto& op = self->state.opus.at(job);
        op.ending->deliver(std::move(err));
        op.ending.reset();
        run_rails(self, job);
      });
  });
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
  const auto last = std::max(1u, job.first_port) + uint32_t(ranks) - 1;
  for (auto& r : job.rails) {
    auto dev = model.device_index(r);
    if (!dev || model.devices[*dev].tier != ocs_tier::rail)
      return fmt::format("'{}' is not a rail OCS", r);
    if (model.devices[*dev].ports < last)
      return fmt::format("rail '{}' has {} ports for {} ranks from port {}", r,
                         model.devices[*dev].ports, ranks, std::max(1u, job.first_port));
  }
  return std::nullopt;
}

/// Whether another Opus job's ports on rail `dev` include `port`.
bool opus_port_taken(self_ptr self, uint32_t dev, uint32_t port, const std::string& except) {
  for (auto& [name, op] : self->state.opus) {
    if (name == except || std::find(op.rails.begin(), op.rails.end(), dev) == op.rails.end())
      continue;
    const auto first = op.orchestrator->first_port();
    if (port >= first && port < first + uint32_t(op.orchestrator->layout().ranks()))
      return true;
  }
  return false;
}

/// Opus §7 (several jobs on one rail OCS): `ranks` ports from `first` fit on every rail and
/// none is another job's.
bool ports_unclaimed(self_ptr self, const std::string& job, const std::vector<uint32_t>& rails,
                     uint32_t first, uint32_t ranks) {
  for (auto dev : rails) {
    if (first < 1 || first + ranks - 1 > self->state.model->devices[dev].ports)
      return false;
    for (uint32_t p = first; p < first + ranks; ++p)
      if (opus_port_taken(self, dev, p, job))
        return false;
  }
  return true;
}

/// ... and, for a new job, each is Loom's (managed) and neither masked nor held by someone
/// else's patch.
bool ports_free(self_ptr self, const std::string& job, const std::vector<uint32_t>& rails,
                uint32_t first, uint32_t ranks) {
  auto& model = *self->state.model;
  if (!ports_unclaimed(self, job, rails, first, ranks))
    return false;
  for (auto dev : rails)
    for (uint32_t p = first; p < first + ranks; ++p)
      if (!model.managed({dev, p}) || model.masked({dev, p}))
        return false;
  return true;
}

/// The job's first port: the one it asked for if free, else the lowest range free on all its
/// rails; or why there is none.
std::variant<uint32_t, std::string> allocate_ports(self_ptr self, const opus_job& job,
                                                   const std::vector<uint32_t>& rails) {
  const auto ranks = uint32_t(opus_layout{job.pp, job.symmetrical}.ranks());
  if (job.first_port != 0) {
    if (ports_free(self, job.job, rails, job.first_port, ranks))
      return job.first_port;
    return fmt::format("ports {}-{} are not free on every rail of '{}'", job.first_port,
                       job.first_port + ranks - 1, job.job);
  }
  for (uint32_t first = 1; first + ranks - 1 <= self->state.model->devices[rails[0]].ports;
       ++first)
    if (ports_free(self, job.job, rails, first, ranks))
      return first;
  std::string held;
  for (auto& [name, op] : self->state.opus)
    held += fmt::format("{}{} {}-{}", held.empty() ? "" : ", ", name,
                        op.orchestrator->first_port(),
                        op.orchestrator->first_port() + op.orchestrator->layout().ranks() - 1);
  return fmt::format("no {} consecutive free ports on every rail of '{}' (Opus jobs: {})", ranks,
                     job.job, held.empty() ? "none" : held);
}

/// Rank r's server: the one wired to port first + r of the job's first rail, or "".
std::vector<std::string> rank_servers(const fabric_model& model, uint32_t dev, uint32_t first,
                                      uint32_t ranks) {
  std::vector<std::string> out(ranks);
  for (auto& l : model.nic_links)
    if (l.port.device == dev && l.port.port >= first && l.port.port < first + ranks)
      out[l.port.port - first] = model.servers[l.server].id;
  return out;
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

opus_registration registration(self_ptr self, const opus_state& op) {
  const auto first = op.orchestrator->first_port();
  opus_registration r{op.orchestrator->current().str(), {}, first,
                      rank_servers(*self->state.model, op.rails.front(), first,
                                   uint32_t(op.orchestrator->layout().ranks()))};
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
  if (job.first_port != 0 && job.first_port != op.orchestrator->first_port())
    return make_error(errc::conflict, fmt::format("Opus job '{}' runs on ports from {}", job.job,
                                                  op.orchestrator->first_port()));
  if (op.ending)
    return make_error(errc::job_ended, fmt::format("Opus job '{}' is ending", job.job));
  if (job.traces.empty())
    return registration(self, op);
  const auto phases = learn(op, job.traces);
  op.spec.traces = job.traces;
  auto promise = self->make_response_promise<opus_registration>();
  persist_and_deliver(self, self->state.store, job_record(self, op),
                      {event_kind::opus_profiled, job.job,
                       fmt::format("stages={} phases={}", job.traces.size(), phases)},
                      promise, registration(self, op));
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
  auto first = allocate_ports(self, job, op.rails);
  if (auto* why = std::get_if<std::string>(&first))
    return make_error(errc::unavailable, *why);
  op.spec.first_port = std::get<uint32_t>(first);
  op.orchestrator.emplace(opus_layout{job.pp, job.symmetrical}, topo_id::parse(job.initial),
                          st.config.max_retries, op.spec.first_port);
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
    auto& op = self->state.opus.at(job.job);
    const auto first = op.orchestrator->first_port();
    persist_and_deliver(self, self->state.store, job_record(self, op),
                        {event_kind::opus_registered, job.job,
                         fmt::format("topo_id={} rails={} phases={} ports={}-{}", job.initial,
                                     job.rails.size(), phases, first,
                                     first + op.orchestrator->layout().ranks() - 1)},
                        promise, registration(self, op));
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
    const auto ranks = uint32_t(opus_layout{rec->job.pp, rec->job.symmetrical}.ranks());
    // A restored job keeps its ports even where a port is masked now (its server is out):
    // only another job's claim on them, after a config change, keeps it out.
    if (!ports_unclaimed(self, r.key, op.rails, rec->job.first_port, ranks)) {
      spdlog::warn("event=opus_restore_skipped job={} reason=\"ports {}-{} are another job's\"",
                   r.key, rec->job.first_port, rec->job.first_port + ranks - 1);
      continue;
    }
    op.orchestrator.emplace(opus_layout{rec->job.pp, rec->job.symmetrical},
                            topo_id::parse(rec->topo), st.config.max_retries,
                            rec->job.first_port);
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
  if (op.ending)
    return make_error(errc::job_ended, fmt::format("Opus job '{}' is ending", job));
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

caf::result<ok_atom> end_opus(self_ptr self, const std::string& job) {
  auto it = self->state.opus.find(job);
  if (it == self->state.opus.end())
    return make_error(errc::not_found, fmt::format("no Opus job '{}'", job));
  auto& op = it->second;
  if (op.ending) // ended twice (a shim and an operator): both hear when it is done
    return make_error(errc::conflict, fmt::format("Opus job '{}' is already ending", job));
  op.ending = self->make_response_promise<ok_atom>();
  auto promise = *op.ending;
  run_rails(self, job);
  return promise;
}

} // namespace loom::controller_steps
