#pragma once
// The whole message protocol of a Loom process, on one page: every atom and every typed actor
// interface. Actors implement these in their own components; nothing else declares one. The
// message types are only declared here (protocol/fwd.hpp); they are the plain data of the
// components' types.hpp, and protocol/inspect.hpp, which every source that sends or receives them
// includes, makes them CAF messages.

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/fwd.hpp"

namespace loom {

// -- atoms (CAF 0.17: at most 10 characters) -----------------------------------------------

using write_atom = caf::atom_constant<caf::atom("write")>;
using scan_atom = caf::atom_constant<caf::atom("scan")>;
using events_atom = caf::atom_constant<caf::atom("events")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using health_atom = caf::atom_constant<caf::atom("health")>;
using fault_atom = caf::atom_constant<caf::atom("fault")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using submit_atom = caf::atom_constant<caf::atom("submit")>;
using finish_atom = caf::atom_constant<caf::atom("finish")>;
using fail_atom = caf::atom_constant<caf::atom("fail")>;
using drift_atom = caf::atom_constant<caf::atom("drift")>;
using profiled_atom = caf::atom_constant<caf::atom("profiled")>;
using footprint_atom = caf::atom_constant<caf::atom("footprint")>;
using jobs_atom = caf::atom_constant<caf::atom("jobs")>;
using groups_atom = caf::atom_constant<caf::atom("groups")>;
using census_atom = caf::atom_constant<caf::atom("census")>;
using join_atom = caf::atom_constant<caf::atom("join")>;
using leave_atom = caf::atom_constant<caf::atom("leave")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using tail_atom = caf::atom_constant<caf::atom("tail")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using resize_atom = caf::atom_constant<caf::atom("resize")>;
using iteration_atom = caf::atom_constant<caf::atom("iteration")>;
using cluster_atom = caf::atom_constant<caf::atom("cluster")>;
using arrive_atom = caf::atom_constant<caf::atom("arrive")>;
using wake_atom = caf::atom_constant<caf::atom("wake")>;
using crash_atom = caf::atom_constant<caf::atom("crash")>;
using staged_atom = caf::atom_constant<caf::atom("staged")>;
using plan_atom = caf::atom_constant<caf::atom("plan")>;
using balance_atom = caf::atom_constant<caf::atom("balance")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using step_done_atom = caf::atom_constant<caf::atom("stepdone")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
using deliver_atom = caf::atom_constant<caf::atom("deliver")>;
using intent_atom = caf::atom_constant<caf::atom("intent")>;
using window_atom = caf::atom_constant<caf::atom("window")>;
using mask_atom = caf::atom_constant<caf::atom("mask")>;
using plans_atom = caf::atom_constant<caf::atom("plans")>;
using opus_atom = caf::atom_constant<caf::atom("opus")>;
using topo_write_atom = caf::atom_constant<caf::atom("topowrite")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using frame_atom = caf::atom_constant<caf::atom("frame")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using connect_atom = caf::atom_constant<caf::atom("connect")>;
using restore_atom = caf::atom_constant<caf::atom("restore")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using job_atom = caf::atom_constant<caf::atom("job")>;
using progress_atom = caf::atom_constant<caf::atom("progress")>;
using overrun_atom = caf::atom_constant<caf::atom("overrun")>;
using stopping_atom = caf::atom_constant<caf::atom("stopping")>;
using answer_atom = caf::atom_constant<caf::atom("answer")>;
using command_atom = caf::atom_constant<caf::atom("command")>;
using engine_atom = caf::atom_constant<caf::atom("engine")>;
using lost_atom = caf::atom_constant<caf::atom("lost")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using finished_atom = caf::atom_constant<caf::atom("finished")>;
using ack_atom = caf::atom_constant<caf::atom("ack")>;
using gen_atom = caf::atom_constant<caf::atom("gen")>;
using ocs_atom = caf::atom_constant<caf::atom("ocs")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;
using node_atom = caf::atom_constant<caf::atom("node")>;
using expert_atom = caf::atom_constant<caf::atom("expert")>;
using caf::flush_atom;
using caf::get_atom;
using caf::ok_atom;

// -- store -----------------------------------------------------------------------------------

/// Persistence of all state (RocksDB). A write is answered only after it is durable when the
/// batch asks for sync, so a decision acknowledged to anyone survives a crash. Writes queued
/// together are committed together (one WAL sync); reads see every write before them.
using store_actor = caf::typed_actor<
  // Internal: commit the writes queued so far.
  caf::reacts_to<drain_atom>,
  // Internal, while read-only: try to open the database for writing again.
  caf::reacts_to<tick_atom>,
  // Check that the store on disk is still the one opened, then again every second (serve
  // starts the watch; replay's stores, on a virtual clock, run without it).
  caf::reacts_to<health_atom>,
  // Atomically applies the batch; answers the event-log sequence after the write.
  caf::replies_to<write_atom, write_batch>::with<uint64_t>,
  // Reads one record; a missing key is an errc::not_found error.
  caf::replies_to<get_atom, record_kind, std::string>::with<std::string>,
  // All records of a kind whose key starts with the prefix, in key order.
  caf::replies_to<scan_atom, record_kind, std::string>::with<std::vector<stored_record>>,
  // Events from a sequence number on, at most `limit` of them.
  caf::replies_to<events_atom, uint64_t, uint64_t>::with<std::vector<stored_record>>,
  // Syncs the WAL so that every write so far is durable.
  caf::replies_to<flush_atom>::with<ok_atom>>;

// -- WEAVE: cluster scheduler, group executors, workers -------------------------------------

/// Sees what the scheduler decides and how iterations run (replay's recorder; live metrics).
using observer_actor = caf::typed_actor<caf::reacts_to<cluster_atom, cluster_record>,
                                        caf::reacts_to<iteration_atom, iteration_record>,
                                        // A phase ran past its overrun deadline (elapsed s).
                                        caf::reacts_to<overrun_atom, std::string, phase_kind,
                                                       double>>;

/// The edge that runs phases: simulated RL frameworks in replay, worker sessions behind the
/// gateway live. In both modes it reports a job's phases (staged_atom, done_atom, tail_atom)
/// straight to the executor the job joined.
using worker_actor = caf::typed_actor<
  // The job joined the sending executor's group: stage its state, then say so.
  caf::reacts_to<join_atom, member_joined>,
  // A run permit (WEAVE §5.1): run the phase now on the granted GPUs.
  caf::reacts_to<run_atom, phase_grant>,
  // The running rollout of a job now has this many GPUs (tail consolidation or growth).
  caf::reacts_to<resize_atom, gpu_resize>,
  // The job left its group (finished, failed, cancelled, drifted): drop whatever it runs.
  caf::reacts_to<leave_atom, std::string, job_state>>;

/// One per co-execution group: round-robin run permits, tail migration (WEAVE §4.3).
using group_executor_actor = caf::typed_actor<
  // A placed job joins with the rollout nodes it is pinned to.
  caf::reacts_to<join_atom, group_member>,
  // After a restart: a placed job comes back where it stood in the round robin.
  caf::reacts_to<restore_atom, group_member, job_progress>,
  // The job left its group, finished, failed, cancelled or drifted.
  caf::reacts_to<leave_atom, std::string, job_state>,
  // The job's workers have its state in host DRAM (WEAVE §5.1 Init): it takes its turns now.
  caf::reacts_to<staged_atom, std::string>,
  // The worker finished a phase; `solo_s` is how long the same work takes alone on full GPUs.
  // Answered once what it changed is durable (an iteration end); a report of a phase the job
  // is not running is an error.
  caf::replies_to<done_atom, std::string, phase_kind, double>::with<ok_atom>,
  // A worker measured the host memory (GB) the job's phase state holds between turns; sent
  // before the phase's done_atom.
  caf::reacts_to<footprint_atom, std::string, phase_kind, double>,
  // The job's rollout has the tail threshold of its responses done.
  caf::reacts_to<tail_atom, std::string>,
  // Where the job stands: iterations, phase, and why it waits.
  caf::replies_to<status_atom, std::string>::with<member_status>,
  // Internal: the phase permitted with this grant sequence number may have overrun.
  caf::reacts_to<overrun_atom, int64_t>>;

/// One per cluster: admission and placement (WEAVE §4.2 Alg. 1), persisted before answered.
using cluster_scheduler_actor = caf::typed_actor<
  caf::replies_to<submit_atom, rl_job>::with<placement_reply>,
  // The job completed its iterations (or its framework says so).
  caf::replies_to<finish_atom, std::string>::with<ok_atom>,
  // The job crashed (reason); it leaves its group, whose other jobs keep running (§5.3).
  caf::replies_to<fail_atom, std::string, std::string>::with<ok_atom>,
  // An operator cancels the job: it leaves its group like a finished one.
  caf::replies_to<cancel_atom, std::string>::with<ok_atom>,
  // A node is out of service (or back): placements avoid it, the jobs pinned to it fail, and
  // the fabric re-plans around the server. Answered once durable.
  caf::replies_to<node_atom, node_report>::with<node_outcome>,
  // The job's measured phases outgrew its profile and saturate its group: stop and re-place
  // it with the measured rollout and training times; the count is iterations it has done.
  caf::reacts_to<drift_atom, std::string, double, double, int64_t>,
  // The job's profiling pass ended (WEAVE §5 (1)(2)): place it with what it measured.
  caf::reacts_to<profiled_atom, job_profile>,
  // An executor's durable record of a job's turn and iterations (kept for status answers and
  // the job's departure). Answered JOB_ENDED where the job left that group first: the count
  // its departure wrote lacks it, so the release it stands for must not be acknowledged.
  caf::replies_to<progress_atom, job_progress>::with<ok_atom>,
  // Jobs in id order, a page: after an id (empty: from the first), at most a count.
  caf::replies_to<jobs_atom, std::string, uint32_t>::with<std::vector<job_status>>,
  // One job, with where it runs and, while placed, its executor's view of it.
  caf::replies_to<job_atom, std::string>::with<job_status>,
  caf::replies_to<groups_atom>::with<std::vector<group_status>>,
  // Jobs per state and groups, counted (for /metrics).
  caf::replies_to<census_atom>::with<scheduler_census>>;

/// Replay's simulated RL frameworks: they submit jobs at their arrival times, run the phases
/// they are permitted on simulated GPUs, crash and resubmit jobs as the scenario says.
using simulated_frameworks_actor = worker_actor::extend<
  caf::reacts_to<connect_atom, cluster_scheduler_actor>, // the scheduler to submit to
  caf::reacts_to<arrive_atom, uint64_t>,                 // job index: submit it now
  caf::reacts_to<wake_atom, std::string, uint64_t>,      // a phase event is due (version)
  caf::reacts_to<staged_atom, std::string, uint64_t>,    // a job's Init is done (join count)
  caf::reacts_to<crash_atom, uint64_t>>;                 // job index: it crashes now

/// `loom drive`: replay's simulated frameworks against a live service. The wire scheduler
/// stands in for the cluster scheduler: it submits over the wire (answers come back as
/// serialized loom.v1 envelopes, by token) and records the cluster as the service decides.
using wire_scheduler_actor = cluster_scheduler_actor::extend<
  caf::reacts_to<answer_atom, uint64_t, std::string>,
  // A job's worker heard the job left its group.
  caf::reacts_to<leave_atom, std::string, job_state>>;

/// `loom drive`: one simulated job's worker session, standing in for its group executor
/// towards the simulated frameworks (staged, done, tail) and speaking loom.v1 to the service.
using wire_job_actor = group_executor_actor::extend<
  caf::reacts_to<answer_atom, uint64_t, std::string>,
  caf::reacts_to<command_atom, std::string>>; // a command from the service, serialized

// -- OrchestrRL: generation planner, balancer, engines -------------------------------------

/// One per generation deployment: the proactive planner (OrchestrRL §4.1, Alg. 1 event 1). It
/// forecasts each new step's length histogram, tracks it as requests finish, and answers a
/// snapshot with a plan; a reconfiguration is durable before it is answered.
using gen_planner_actor = caf::typed_actor<
  caf::replies_to<plan_atom, gen_snapshot>::with<gen_decision>,
  // The step is over: every request it finished, with its output length. Answers the
  // relative errors of the forecast made at its start, of the histogram and of the mean
  // length (NaN: no forecast).
  caf::replies_to<step_done_atom, uint64_t, std::vector<request_done>>::with<double, double>>;

/// One per generation deployment: the reactive balancer (OrchestrRL §4.2, Alg. 1 event 2). On
/// each monitoring tick it answers the workers' loads with the migrations to make.
using balancer_actor = caf::typed_actor<
  caf::replies_to<balance_atom, std::vector<gen_worker>>::with<std::vector<migration>>>;

/// Sees what generation deployments do (replay's recorder; live metrics).
using gen_observer_actor = caf::typed_actor<caf::reacts_to<gen_atom, gen_record>>;

/// The edge a deployment's controller commands: its engines and its router (live: their
/// sessions behind the gateway; replay: simulated engines and the simulated framework).
using engine_edge_actor = caf::typed_actor<
  // A command for one engine of the deployment (named in it); the engine answers ack_atom.
  caf::reacts_to<command_atom, std::string, gen_command>,
  // Every request of the deployment's step finished: its routers hear so.
  caf::reacts_to<step_done_atom, step_outcome>>;

/// One per generation deployment: runs Alg. 1 against its engines (deployment_runtime). It
/// lays instances over the engines that register, consults the planner at each step's start
/// and every planning period and the balancer on every monitoring tick, and commands the
/// engines; every command is durable before it is sent, and one not answered in time is sent
/// again, then abandoned with its engine.
using gen_controller_actor = caf::typed_actor<
  // An engine registers (again); refused with errc::invalid_argument or errc::conflict.
  caf::replies_to<engine_atom, engine_hello>::with<ok_atom>,
  // The engine is gone (its session died or it said goodbye): why.
  caf::reacts_to<lost_atom, std::string, std::string>,
  // One instance's load on a tick.
  caf::reacts_to<stats_atom, instance_stats>,
  // Requests an engine finished: answered once durable.
  caf::replies_to<finished_atom, requests_finished>::with<ok_atom>,
  caf::reacts_to<ack_atom, command_ack>,
  // The router starts a step: answered with where its requests run, once that is durable.
  caf::replies_to<step_atom, step_batch>::with<step_placement>,
  // The last step that ended, for a router that was away when its StepDone went out;
  // errc::not_found before any.
  caf::replies_to<step_done_atom>::with<step_outcome>,
  caf::replies_to<status_atom>::with<gen_status>,
  // An operator aborts the running step (why): answered with its outcome once durable;
  // errc::not_found when no step runs.
  caf::replies_to<cancel_atom, std::string>::with<step_outcome>,
  caf::replies_to<plan_atom, parallel_config>::with<ok_atom>, // an operator's layout
  // Internal: the controller's alarm (its version).
  caf::reacts_to<tick_atom, uint64_t>>;

/// Replay's simulated generation framework: the RL framework's router, starting each step of
/// a scenario once the previous one is done and trained on, and the deployment's engines,
/// running instance simulators on the actor clock and obeying the controller's commands.
using simulated_generation_actor = engine_edge_actor::extend<
  caf::reacts_to<connect_atom, gen_controller_actor>, // register the engines, start step 0
  caf::reacts_to<step_atom>,                          // the router starts the next step
  caf::reacts_to<tick_atom>,                          // the engines' monitoring tick
  caf::reacts_to<deliver_atom, std::string, command_ack>>; // an answer due now

// -- OCS drivers (Opus §4.3: one vendor-neutral interface over TL1, emulation, agents) -------

/// One actor per OCS device. A diff that breaks the cross-connect model (port range, masked
/// port, port used twice, port busy, unknown cross-connect) is refused with driver_refused
/// before anything reaches the device; untouched cross-connects are never disturbed.
using ocs_driver_actor = caf::typed_actor<
  // Applies removes then adds as one operation; answers what it cost.
  caf::replies_to<apply_atom, xc_diff>::with<apply_report>,
  // Reads back the device's cross-connects.
  caf::replies_to<get_atom>::with<std::vector<cross_connect>>,
  // Polls the device: connected, geometry, alarms (failed ports).
  caf::replies_to<health_atom>::with<driver_health>>;

/// The gateway as the link to OCS agents: a request for the agent session it names.
using ocs_link_actor = caf::typed_actor<caf::reacts_to<ocs_atom, std::string, ocs_request>>;

/// The driver of a device whose switch an OCS agent drives (`loom ocs-agent`, over loom.v1):
/// the driver protocol while an agent is attached; without one the device is unreachable.
using agent_driver_actor = ocs_driver_actor::extend<
  // An agent's session (its connection identity) took the device; the link carries requests.
  caf::reacts_to<join_atom, std::string, ocs_link_actor>,
  // That session ended (goodbye, silence, replaced): what it had in flight fails.
  caf::reacts_to<leave_atom, std::string>,
  // The agent answered.
  caf::reacts_to<ocs_reply>,
  // Internal: a request's deadline.
  caf::reacts_to<tick_atom, uint64_t>>;

// -- RFabric / mFabric / Opus: the fabric controller --------------------------------------

/// One per fabric: materialises a circuit plan per owner's intent (RFabric Alg. 2: template,
/// aggregated demand, App. D allocation, validation), commits it through the OCS drivers only
/// inside a safe window, and persists every committed plan before it answers. A plan that does
/// not validate leaves the previous one in force and is retried at the owner's next window.
using fabric_controller_actor = caf::typed_actor<
  caf::replies_to<intent_atom, fabric_intent, commit_window>::with<fabric_decision>,
  // The owner's next safe window: commit what is deferred or was kept back.
  caf::replies_to<window_atom, std::string, commit_window>::with<fabric_decision>,
  // An OCS port failed (device, port): masked; answers the owners whose plans must move.
  caf::replies_to<mask_atom, std::string, uint32_t>::with<std::vector<std::string>>,
  // A server failed (true) or is back (false) (RFabric §5.4 (i)): its NIC links stop counting
  // and its ranks leave the plans; answers the owners that re-plan at their next window.
  caf::replies_to<node_atom, std::string, bool>::with<std::vector<std::string>>,
  caf::replies_to<plans_atom>::with<fabric_listing>,
  // The circuits an owner's committed plan provides (empty when it has none).
  caf::replies_to<get_atom, std::string>::with<circuit_layout>,
  // mFabric §5.1: a MoE layer's dispatch load for the owner's traffic monitor, whose App. B
  // prediction weighs the owner's `predicted` intents.
  caf::replies_to<expert_atom, expert_load>::with<ok_atom>,
  // Opus: a job on photonic rails (answered once they carry its first topology; again with its
  // stages' profiled traces: answered with the phase table), then its ranks' topo_writes
  // (answered after the rails confirm the transition).
  caf::replies_to<opus_atom, opus_job>::with<opus_registration>,
  caf::replies_to<topo_write_atom, std::string, topo_write>::with<topo_ack>,
  // The job is done: its circuits leave its rails and its ports are free (Opus §7), durably.
  caf::replies_to<opus_atom, cancel_atom, std::string>::with<ok_atom>,
  // Internal: the periodic health poll of every device (App. H), and a committed decision
  // whose circuits are now up (the link-up delay after the switch confirmed).
  caf::reacts_to<poll_atom>,
  caf::reacts_to<deliver_atom, uint64_t>>;

// -- the gateway ---------------------------------------------------------------------------

/// The gateway (live): the worker edge for real RL frameworks over ZeroMQ, and every peer's
/// entry point. Frames arrive from its I/O thread.
using gateway_actor = worker_actor::extend<
  // The actors it serves requests with, sent once by `serve` before frames can arrive; the
  // fabric controller is null when the service runs no fabric.
  caf::reacts_to<connect_atom, cluster_scheduler_actor, fabric_controller_actor>,
  // A generation deployment's controller, by name (one message per deployment, likewise).
  caf::reacts_to<connect_atom, std::string, gen_controller_actor>,
  caf::reacts_to<frame_atom, std::vector<wire_frame>>,
  caf::reacts_to<sweep_atom>, // heartbeat check
  // The service is stopping: every session is told so (answered once the notices are queued).
  caf::replies_to<stopping_atom>::with<ok_atom>,
  // The driver of a device OCS agents drive, by device id (one message per device, likewise).
  caf::reacts_to<ocs_atom, std::string, agent_driver_actor>>::extend_with<engine_edge_actor>
  ::extend_with<ocs_link_actor>;

/// The in-process emulated OCS: the driver protocol plus fault injection. Its latencies run on
/// the actor clock, so replay advances them virtually.
using emulated_ocs_actor = ocs_driver_actor::extend<
  caf::replies_to<fault_atom, ocs_fault>::with<ok_atom>,
  // Internal: a reconfiguration's latency has elapsed.
  caf::reacts_to<commit_atom, uint64_t>>;

} // namespace loom
