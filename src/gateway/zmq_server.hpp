#pragma once
// The gateway's ZeroMQ edge: one ROUTER socket on the configured endpoint, served by a thread
// of its own so that CAF's scheduler never blocks on I/O. With CURVE on, a ZAP handler admits
// only the configured client public keys and stamps each connection with its role (the ZAP
// User-Id); refused handshakes are counted. The socket is bound by open() and served once
// run() is given where frames go (called on the I/O thread); `send` may be called from any
// thread (a queue and an eventfd wake the I/O thread).

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <caf/expected.hpp>

#include "gateway/keys.hpp"
#include "types/gateway.hpp"

namespace loom {

/// The largest frame the ROUTER takes (ZMQ_MAXMSGSIZE); a bigger one drops its connection
/// before it is buffered. A step of 100,000 requests is under 4 MiB.
constexpr int64_t max_frame_bytes = int64_t{16} << 20;
/// Frames handed to the gateway and not yet handled: past either bound the I/O thread stops
/// reading, so a flood waits in the peers' queues and TCP, not in the gateway's mailbox.
constexpr size_t max_frames_in_flight = 4096;
constexpr size_t max_bytes_in_flight = size_t{64} << 20;
/// Frames handed to the gateway in one message at most.
constexpr size_t max_batch = 256;

struct zmq_server_config {
  std::string endpoint;
  bool insecure = false;
  curve_keypair server;
  std::map<std::string, worker_role> clients; // Z85 public key -> role
};

class zmq_server {
public:
  using inbound = std::function<void(std::vector<wire_frame>)>;

  /// Binds the endpoint; nothing is received until run().
  static caf::expected<std::unique_ptr<zmq_server>> open(zmq_server_config config,
                                                         std::function<void()> on_refused);
  /// Starts the I/O thread, which hands the frames to `on_frame` in the order read, as many
  /// as are waiting at once (up to max_batch).
  void run(inbound on_frame);
  /// Stops the I/O thread (also on destruction); nothing is received or sent after.
  void stop();
  ~zmq_server();
  zmq_server(const zmq_server&) = delete;
  zmq_server& operator=(const zmq_server&) = delete;

  void send(std::string identity, std::string payload);
  /// [ha]: frames go out only while `may_send` says so (before run()), refusals excepted (error
  /// replies, the stopping notice): a leader whose lease may have ended tells no worker of a
  /// decision, even before it has noticed (a process that stood still past its lease).
  void fence(std::function<bool()> may_send);
  /// The client keys admitted from the next handshake on (a reload); sessions already
  /// admitted keep their connection.
  void set_clients(std::map<std::string, worker_role> clients);
  /// The gateway handled a frame of `bytes` payload (any thread).
  void handled(size_t bytes);
  /// The endpoint actually bound (a tcp port 0 resolved).
  const std::string& endpoint() const { return bound_; }

private:
  zmq_server() = default;
  void serve();

  struct impl;
  std::unique_ptr<impl> impl_;
  std::string bound_;
  std::thread thread_;
};

} // namespace loom
