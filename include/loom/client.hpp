#pragma once
// libloomclient: how RL-framework workers and operators talk to `loom serve` (loom.v1 over a
// ZeroMQ DEALER socket, CURVE-encrypted unless the service runs insecure).
//
// One I/O thread per client owns the socket: it sends what callers queue, files replies by
// request id, sends heartbeats at the service's rate and hands commands (tail migration, job
// left, waiting reasons) to a callback or a queue. Any thread may call. ZeroMQ reconnects with
// exponential backoff (100 ms up to 5 s).
//
// When the service goes away (it says ServiceStopping, or a restarted one no longer knows the
// session), the client registers again under the same worker id, from the same process, and
// sends again what was in flight of PhaseAcquire (nothing ran yet), Staged and PhaseRelease.
// A release names its grant's iteration: the service acknowledges one whose iteration end it
// already counted, and answers ERROR_RESTART_ITERATION to any other (run the job's iteration
// again from its rollout, where the restarted service resumes it). Any other request in flight
// is answered ERROR_RESTART_ITERATION by the client. A registered client's calls wait through
// an outage of any length (client_options::outage_limit bounds it), so a worker outlives a
// restart however long it takes.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "loom.pb.h"

namespace loom {

/// Waits as long as it takes.
inline constexpr std::chrono::milliseconds no_timeout{0};

struct client_options {
  // The service's gateway; several, comma-separated, for the replicas of a service with [ha]:
  // the client connects to each, and only the leader listens, so it talks to the leader and
  // moves to the next one when it fails over.
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string server_public_key; // Z85; empty: plain text (the service must run insecure)
  std::string public_key;        // this client's Z85 key pair
  std::string secret_key;
  // Calls other than PhaseAcquire (which waits for its turn as long as it takes unless given
  // a timeout); no_timeout waits for every call as long as it takes.
  std::chrono::milliseconds timeout{5000};
  // Once registered, a call waits through an outage (the service restarting, its link down)
  // for this long and counts its timeout from when the service is back; no_timeout: however
  // long the outage lasts.
  std::chrono::milliseconds outage_limit = no_timeout;
  // Where the client says that the service went away and came back (one line each; called on
  // the client's I/O thread, under its lock: it must not call the client); default: standard
  // error.
  std::function<void(const std::string&)> log;
};

/// Reads a key file written by `loom keygen` (one Z85 key); empty if it cannot.
std::string read_key(const std::string& path);

/// A call that did not succeed: the service's typed error (a loom.v1.ErrorCode), or 0 when no
/// answer came in time.
struct call_error {
  int code = 0;
  std::string message;
  /// The service restarted (or the job was placed again) under the phase: run the job's
  /// iteration again from its rollout.
  bool restart_iteration() const;
  /// The job finished, failed, was cancelled or rejected: stop.
  bool job_ended() const;
};

/// A value, or why there is none.
template <class T>
struct outcome {
  std::optional<T> value;
  call_error error;
  explicit operator bool() const { return value.has_value(); }
  T& operator*() { return *value; }
  const T& operator*() const { return *value; }
  T* operator->() { return &*value; }
  const T* operator->() const { return &*value; }
};

class client {
public:
  explicit client(client_options options);
  /// Says nothing to the service (see goodbye) and never blocks past a short linger.
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Sends `request` (version and request id are set here) and waits for the reply with the
  /// same request id, at most `options.timeout`; nothing if none came.
  std::optional<v1::Envelope> call(v1::Envelope request);
  std::optional<v1::Envelope> call(v1::Envelope request, std::chrono::milliseconds timeout);
  /// Sends `request` and returns at once; `done` gets the reply (on the client's I/O thread),
  /// as call() would return it, without a timeout. For callers that must not block (actors).
  void call_async(v1::Envelope request, std::function<void(std::optional<v1::Envelope>)> done);
  /// Sends a one-way message (progress, goodbye); never blocks.
  void send(v1::Envelope message);

  /// Registers (remembered for registering again) and starts heartbeats at the service's rate.
  /// Roles: driver (every phase of its job), rollout, train, collective-shim, ocs-agent, admin.
  std::optional<v1::Envelope> register_worker(const std::string& role, const std::string& worker_id,
                                              const std::string& job, const std::string& node = "");
  /// Registers any Register message (version and request id are set here), e.g. the
  /// generation roles' (below), which name their deployment.
  std::optional<v1::Envelope> register_as(v1::Register registration);

  // -- generation (OrchestrRL §4): engines and routers ------------------------------------------

  /// An inference engine (role gen-instance): one node's server with `gpus` GPUs, serving
  /// `deployment`. Commands arrive as Reconfigure, AdmitRequests and MigrateRequests.
  std::optional<v1::Envelope> register_engine(const std::string& engine_id,
                                              const std::string& deployment, uint32_t gpus,
                                              const std::string& node = "");
  /// The framework's request router of `deployment` (role gen-router).
  std::optional<v1::Envelope> register_router(const std::string& router_id,
                                              const std::string& deployment);
  /// How often an engine reports GenStats (the deployment's monitoring tick), from its
  /// registration; 0 before.
  uint32_t stats_interval_ms() const;
  /// One instance's load this tick (one-way; the next tick's supersedes a lost one).
  void gen_stats(v1::GenStats stats);
  /// Requests the engine finished; `answered` (on the I/O thread, may be empty) hears when
  /// they are durable. Sent again to a restarted service.
  void requests_finished(v1::RequestsFinished done,
                         std::function<void(std::optional<call_error>)> answered = {});
  /// Answers a command (one-way).
  void ack(v1::CommandAck ack);
  /// The router starts a step: blocks until its requests are placed (or the step is found
  /// already done: StepPlaced.done). Sent again to a restarted service.
  outcome<v1::StepPlaced> start_step(v1::StepStart step);
  /// WEAVE §5.1 Init done: the job's state is in host DRAM (its first acquire says so too).
  std::optional<call_error> staged(const std::string& job);
  /// WEAVE §5.1: blocks until the phase ("rollout", "training", "sync") is granted.
  outcome<v1::PhaseGrant> acquire(const std::string& job, const std::string& phase,
                                  std::chrono::milliseconds timeout = no_timeout);
  /// The phase is done; `solo_s`: how long the same work takes alone on full GPUs;
  /// `host_memory_gb`: what its state holds in host DRAM until its next turn, per node, when
  /// measured (a profiling pass, PhaseGrant.profiling, places the job with it).
  std::optional<call_error> release(const std::string& job, const std::string& phase,
                                    double solo_s, double host_memory_gb = 0);
  /// RFabric §5.2: the owner's next communication period (stage, primitive, ranks, bytes and
  /// the window before it; docs/protocol.md, "Fabric"). Blocks until Loom decided: committed,
  /// unchanged, deferred or kept, with the reason in FabricDecision.reason.
  outcome<v1::FabricDecision> fabric_intent(v1::FabricIntent intent);
  /// The owner is at a collective-free window with no new intent: Loom tries its standing
  /// intent (one deferred or kept) now and answers as for an intent.
  outcome<v1::FabricDecision> fabric_window(v1::FabricWindow window);
  /// mFabric §5.1: a MoE layer's expert load (tokens per member of the owner's all-to-all);
  /// returns once Loom recorded it for its predictions (App. B).
  std::optional<call_error> expert_load(v1::ExpertLoad load);
  /// Rollout progress (WEAVE §4.3: drives long-tail migration).
  void progress(const std::string& job, uint32_t responses_done, uint32_t responses_total);
  /// Leaves: `job_finished` tells the service the job is complete, `job_failed` that it
  /// crashed (it fails alone, WEAVE §5.3).
  void goodbye(const std::string& reason, bool job_finished, bool job_failed = false);

  /// Commands from the service: pulled, or pushed to a callback (on the I/O thread).
  std::optional<v1::Envelope> next_command(std::chrono::milliseconds wait);
  void on_command(std::function<void(const v1::Envelope&)> callback);
  /// Why the last acquire of this client waits (the service's Waiting), or empty.
  std::string waiting_reason() const;
  /// Why the service may not have answered, from what the link saw: nothing listening, a
  /// CURVE handshake that never completed (another service's server key, a stale server.pub),
  /// or the service refusing this client's key. Empty once a handshake succeeded.
  std::string link_diagnosis() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A phase held for the lifetime of the guard (RAII over acquire/release): constructed, it
/// blocks until the phase is granted; destroyed (or done()), it releases the phase with the
/// time it was held, or with the solo time given to done(). Check it before running the phase.
class phase_guard {
public:
  phase_guard(client& c, std::string job, std::string phase,
              std::chrono::milliseconds timeout = no_timeout);
  ~phase_guard();
  phase_guard(const phase_guard&) = delete;
  phase_guard& operator=(const phase_guard&) = delete;

  explicit operator bool() const { return granted_.has_value(); }
  const v1::PhaseGrant& grant() const { return *granted_; }
  /// Why the phase was not granted, or why its release failed.
  const call_error& error() const { return error_; }
  /// Releases now; `solo_s` < 0: the time the phase was held. False if the service refused.
  bool done(double solo_s = -1);

private:
  client& client_;
  std::string job_;
  std::string phase_;
  std::optional<v1::PhaseGrant> granted_;
  call_error error_;
  std::chrono::steady_clock::time_point since_;
  bool released_ = false;
};

} // namespace loom
