#pragma once
// libloomclient: how RL-framework workers and operators talk to `loom serve` (loom.v1 over a
// ZeroMQ DEALER socket, CURVE-encrypted unless the service runs insecure).
//
// Thread-safe: any thread may call; a caller holds the socket only for short poll slices, so
// the heartbeat thread and other callers interleave, and replies are matched by request id.
// Blocking API: call() / acquire() wait for the reply. Callback API: on_command() sees every
// command (tail migration, job left, ...) as it arrives. ZeroMQ reconnects with exponential
// backoff (100 ms up to 5 s); when a restarted service no longer knows the session, the client
// registers again under the same worker id and resends the request.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace loom::v1 {
class Envelope;
class PhaseGrant;
} // namespace loom::v1

namespace loom {

struct client_options {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string server_public_key; // Z85; empty: plain text (the service must run insecure)
  std::string public_key;        // this client's Z85 key pair
  std::string secret_key;
  std::chrono::milliseconds timeout{5000};
};

/// Reads a key file written by `loom keygen` (one Z85 key); empty if it cannot.
std::string read_key(const std::string& path);

class client {
public:
  explicit client(client_options options);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Sends `request` (version and request id are set here) and waits for the reply with the
  /// same request id; nothing after the timeout.
  std::optional<v1::Envelope> call(v1::Envelope request);
  /// Sends a one-way message (progress, goodbye).
  void send(v1::Envelope message);

  /// Registers (remembered for re-registration) and starts heartbeats at the service's rate.
  std::optional<v1::Envelope> register_worker(const std::string& role, const std::string& worker_id,
                                              const std::string& job, const std::string& node = "");
  /// WEAVE §5.1: blocks until the phase is granted ("rollout", "training", "sync").
  std::optional<v1::PhaseGrant> acquire(const std::string& job, const std::string& phase,
                                        std::chrono::milliseconds timeout);
  bool release(const std::string& job, const std::string& phase, double solo_s);

  /// Commands from the service: pulled, or pushed to a callback (on a caller's thread).
  std::optional<v1::Envelope> next_command(std::chrono::milliseconds wait);
  void on_command(std::function<void(const v1::Envelope&)> callback);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace loom
