#pragma once
// The gateway's steps, shared by its sources (gateway.cpp: frames, sessions, stopping;
// gateway_jobs.cpp: the executors' side and jobs without one; gateway_admin.cpp: operators'
// requests; gateway_worker.cpp: registered peers' traffic). Internal.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "gateway/gateway.hpp"
#include "gateway/wire.hpp"

namespace loom::gateway_steps {

/// PhaseAcquire requests one connection may have waiting; a worker needs one per phase it runs.
constexpr size_t max_waiting_acquires = 64;
/// And on all of them together: the matcher's memory stays bounded whatever the keys do.
constexpr size_t max_waiting_acquires_total = 65'536;

using self_ptr = gateway_actor::stateful_pointer<gateway_state>;

void send_frame(self_ptr self, const std::string& identity, v1::Envelope& e);

void send_error(self_ptr self, const std::string& identity, uint64_t request_id,
                v1::ErrorCode code, std::string message);

/// Answers a request with an actor's error, typed by its code.
void send_failure(self_ptr self, const std::string& identity, uint64_t request_id,
                  const caf::error& err);

/// Answers a request with the reply `fill` builds.
template <class Fill>
void reply(self_ptr self, const std::string& identity, uint64_t request_id, Fill fill) {
  v1::Envelope e;
  e.set_request_id(request_id);
  fill(e);
  send_frame(self, identity, e);
}

/// Sends a command to every live session of a job.
template <class Fill>
void command_job(self_ptr self, const std::string& job, Fill fill) {
  for (auto& identity : self->state.sessions.identities_of(job)) {
    v1::Envelope e;
    fill(e);
    send_frame(self, identity, e);
  }
}

/// Whether the envelope is an admin request (the loom CLI's).
bool is_admin_request(const v1::Envelope& env);
/// Answers an admin request.
void handle_admin(self_ptr self, const std::string& identity, const v1::Envelope& env);

/// Opus §7: the job is done, its rails' circuits removed and its ports freed (asked by its
/// shim, or by an operator).
void end_opus_job(self_ptr self, const std::string& identity, uint64_t rid,
                  const std::string& job);

/// Traffic of a registered session.
void handle_worker(self_ptr self, const std::string& identity, session& s,
                   const v1::Envelope& env);

/// The live sessions per role, as gauges.
void update_alive(self_ptr self);

// -- generation (gateway_gen.cpp) ------------------------------------------------------------

/// Decides, once the session is open, whether it may stay: calls its argument with an error
/// to refuse it, or with none.
using admission = std::function<void(std::function<void(const caf::error&)>)>;

/// A gen-instance or gen-router registers for a deployment the service runs: nothing (after
/// answering why) if it cannot, else the admission (an engine's deployment must take it).
std::optional<admission> deployment_admission(self_ptr self, const std::string& identity,
                                              uint64_t rid, const v1::Register& r,
                                              const session& s);

/// Generation traffic of a registered session (GenStats, RequestsFinished, CommandAck,
/// StepStart); false if the envelope is none of it.
bool handle_generation(self_ptr self, const std::string& identity, const session& s,
                       const v1::Envelope& env);

/// An engine's session ended (goodbye or silence): its deployment loses it.
void engine_gone(self_ptr self, const std::string& worker_id, const session& s,
                 const std::string& why);

/// The engine edge: a command to an engine's session, a step's end to the routers.
void command_engine(self_ptr self, const std::string& deployment, const gen_command& c);
void step_finished(self_ptr self, const step_outcome& o);

/// `loom generation`: every deployment's status.
void list_generation(self_ptr self, const std::string& identity, uint64_t rid);
void abort_step(self_ptr self, const std::string& identity, uint64_t rid,
                const v1::AbortStep& m);
/// `loom generation reconfigure`: an operator's layout for a deployment.
void set_layout(self_ptr self, const std::string& identity, uint64_t rid,
                const v1::SetLayout& m);

// -- OCS agents (gateway_ocs.cpp) ------------------------------------------------------------

/// An ocs-agent registers for a device the service drives through agents: nothing (after
/// answering why) if it cannot, else the admission (the device's driver takes the session).
std::optional<admission> agent_admission(self_ptr self, const std::string& identity,
                                         uint64_t rid, const std::string& worker_id,
                                         const session& s);

/// An agent's OcsResult; false if the envelope is not one.
bool handle_ocs(self_ptr self, const std::string& identity, const session& s,
                const v1::Envelope& env);

/// A request of a device's driver for the agent session it names.
void request_agent(self_ptr self, const std::string& identity, const ocs_request& r);

/// A session ended (goodbye or silence): its waiting acquires go, an engine's deployment loses
/// it, an agent's device its agent.
void peer_gone(self_ptr self, const std::string& worker_id, const session& s,
               const std::string& why);

// -- jobs (gateway_jobs.cpp) ------------------------------------------------------------------

/// The executor the job joined, or null.
group_executor_actor executor_of(self_ptr self, const std::string& job);

/// A worker of the job has its state staged: its executor hears so once per placement.
void stage(self_ptr self, const std::string& job);

/// A request for a job the gateway has no executor for. If the scheduler has it placed (its
/// executor's join is on its way) `placed` runs; else `refused` runs and the request is
/// answered with why: the job is unknown, or ended.
void when_placed(self_ptr self, const std::string& job, const std::string& identity,
                 uint64_t request_id, std::function<void()> placed,
                 std::function<bool()> refused);

/// Tells a worker whose acquire waits why it waits. A driver (it runs its job's phases in
/// turn) asking for a phase its job is not at is told to run its iteration again.
void explain_wait(self_ptr self, const std::string& job, phase_kind phase,
                  const std::string& identity, uint64_t request_id, bool in_turn_only);

void job_joined(self_ptr self, const member_joined& m);
void permit(self_ptr self, const phase_grant& g);
/// A grant on the wire; rollout and sync grants carry the job's weight route (WEAVE §5.2).
void fill_grant(self_ptr self, v1::PhaseGrant& out, const phase_grant& g);
void job_left(self_ptr self, const std::string& job, job_state why);

} // namespace loom::gateway_steps
