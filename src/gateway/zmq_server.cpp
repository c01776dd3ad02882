#include "gateway/zmq_server.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <zmq.hpp>

#include "loom.pb.h"
#include "protocol/error.hpp"

namespace loom {

struct zmq_server::impl {
  zmq_server_config config;
  inbound on_frame;
  std::function<void()> on_refused;
  zmq::context_t context{1};
  zmq::socket_t zap{context, zmq::socket_type::rep};
  zmq::socket_t router{context, zmq::socket_type::router};
  zmq::socket_t monitor{context, zmq::socket_type::pair}; // the router's handshake failures
  int wake = -1;
  std::mutex mutex;
  std::deque<std::pair<std::string, std::string>> outbox;
  std::function<bool()> fence; // set before run(); read by the I/O thread only
  std::atomic<bool> stop{false};
  std::atomic<size_t> frames_in_flight{0};
  std::atomic<size_t> bytes_in_flight{0};

  bool saturated() const {
    return frames_in_flight.load() >= max_frames_in_flight
           || bytes_in_flight.load() >= max_bytes_in_flight;
  }

  ~impl() {
    if (wake >= 0)
      ::close(wake);
  }

  std::map<std::string, std::chrono::steady_clock::time_point> refused_logged;

  /// A refused key is logged once a minute at most, so a client retrying cannot flood the log.
  void log_refused(const std::string& key, const std::string& address) {
    auto now = std::chrono::steady_clock::now();
    auto [it, fresh] = refused_logged.try_emplace(key, now);
    if (!fresh && now - it->second < std::chrono::minutes{1})
      return;
    it->second = now;
    if (refused_logged.size() > 1024)
      refused_logged.clear();
    spdlog::warn("event=gateway_key_refused key={} address={} reason=\"not in "
                 "[security.clients]\"",
                 key.empty() ? "none" : key, address);
  }

  std::optional<std::chrono::steady_clock::time_point> failure_logged;

  /// A peer whose CURVE handshake failed before ZAP (it encrypted to another server key, or
  /// speaks plain ZeroMQ): its client only sees silence, so the service says why, once a
  /// minute at most (the event names the bound endpoint, not the peer).
  void log_handshake_failures() {
    zmq::message_t event, address;
    while (monitor.recv(event, zmq::recv_flags::dontwait)) {
      (void)monitor.recv(address, zmq::recv_flags::dontwait);
      if (event.size() < sizeof(uint16_t) + sizeof(uint32_t))
        continue;
      uint32_t value;
      std::memcpy(&value, static_cast<const char*>(event.data()) + sizeof(uint16_t), sizeof value);
      auto now = std::chrono::steady_clock::now();
      if (failure_logged && now - *failure_logged < std::chrono::minutes{1})
        continue;
      failure_logged = now;
      const char* why = value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                          ? "the client does not speak CURVE (no server key given)"
                          : "the client's server key is not this service's (a stale "
                            "server.pub?)";
      spdlog::warn("event=gateway_handshake_failed endpoint={} code={:#x} reason=\"{}\"",
                   address.to_string(), value, why);
    }
  }

  /// ZAP (RFC 27): admit a CURVE client whose key is configured. The User-Id carries its role
  /// and key ("role:key"), so the gateway can bind sessions to the key.
  void answer_zap() {
    std::vector<zmq::message_t> parts;
    while (true) {
      zmq::message_t part;
      if (!zap.recv(part, zmq::recv_flags::dontwait))
        break;
      bool more = part.more();
      parts.push_back(std::move(part));
      if (!more)
        break;
    }
    if (parts.size() < 6)
      return;
    std::string user, key;
    if (parts[5].to_string_view() == "CURVE" && parts.size() >= 7 && parts[6].size() == 32) {
      char z85[41] = {};
      zmq_z85_encode(z85, static_cast<const uint8_t*>(parts[6].data()), 32);
      key = z85;
      std::lock_guard<std::mutex> guard{mutex}; // set_clients() may swap the keys
      auto it = config.clients.find(key);
      if (it != config.clients.end())
        user = fmt::format("{}:{}", it->second, key);
    }
    bool ok = !user.empty();
    if (!ok) {
      log_refused(key, parts[3].to_string());
      if (on_refused)
        on_refused();
    }
    std::vector<std::string> reply{"1.0", parts[1].to_string(), ok ? "200" : "400",
                                   ok ? "OK" : "unknown client key", user, ""};
    for (size_t i = 0; i < reply.size(); ++i)
      zap.send(zmq::buffer(reply[i]),
               i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }

  void flush_outbox() {
    uint64_t n;
    [[maybe_unused]] auto r = ::read(wake, &n, sizeof n);
    std::deque<std::pair<std::string, std::string>> batch;
    {
      std::lock_guard<std::mutex> guard{mutex};
      batch.swap(outbox);
    }
    if (fence && !batch.empty() && !fence()) {
      // A refusal (an error reply, the stopping notice) decides nothing: it still goes out.
      auto decides = [](const std::pair<std::string, std::string>& f) {
        v1::Envelope e;
        return !e.ParseFromString(f.second) || !(e.has_error() || e.has_service_stopping());
      };
      const auto held = std::count_if(batch.begin(), batch.end(), decides);
      std::erase_if(batch, decides);
      if (held)
        spdlog::warn("event=gateway_fenced frames={} reason=\"this replica may no longer lead: "
                     "nothing it decided goes out\"",
                     held);
    }
    for (auto& [id, payload] : batch) {
      try {
        router.send(zmq::buffer(id), zmq::send_flags::sndmore);
        router.send(zmq::buffer(payload), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        spdlog::warn("event=gateway_send_failed error=\"{}\"", e.what());
      }
    }
  }

  /// Hands the frames waiting to the gateway, up to max_batch at a time: one actor message
  /// (and one wake of its thread) per batch, not per frame.
  void receive() {
    std::vector<wire_frame> batch;
    while (!saturated()) {
      auto frame = read_frame();
      if (!frame)
        break;
      batch.push_back(std::move(*frame));
      if (batch.size() == max_batch)
        on_frame(std::exchange(batch, {}));
    }
    if (!batch.empty())
      on_frame(std::move(batch));
  }

  /// One frame from the router, or nothing if none is waiting.
  std::optional<wire_frame> read_frame() {
    zmq::message_t id;
    if (!router.recv(id, zmq::recv_flags::dontwait))
      return std::nullopt;
    // The body, and how many parts came after the identity (one is the protocol).
    zmq::message_t body;
    size_t parts = 0;
    for (bool more = id.more(); more; ++parts) {
      (void)router.recv(body, zmq::recv_flags::none);
      more = body.more();
    }
    wire_frame frame;
    frame.identity = id.to_string();
    if (parts && !config.insecure)
      if (auto* uid = body.gets("User-Id")) {
        std::string_view user{uid};
        auto colon = user.find(':');
        if (auto role = parse_name<worker_role>(user.substr(0, colon));
            role && colon != std::string_view::npos) {
          frame.role = *role;
          frame.key = std::string{user.substr(colon + 1)};
          frame.authenticated = true;
        }
      }
    // One frame is the protocol; anything else is malformed and answered as such.
    frame.single_part = parts == 1;
    if (frame.single_part)
      frame.payload = body.to_string();
    ++frames_in_flight;
    bytes_in_flight += frame.payload.size();
    return frame;
  }
};

caf::expected<std::unique_ptr<zmq_server>> zmq_server::open(zmq_server_config config,
                                                            std::function<void()> on_refused) {
  std::unique_ptr<zmq_server> s{new zmq_server};
  s->impl_ = std::make_unique<impl>();
  auto& i = *s->impl_;
  i.config = std::move(config);
  i.on_refused = std::move(on_refused);
  try {
    i.router.set(zmq::sockopt::router_mandatory, 0);
    i.router.set(zmq::sockopt::linger, 0);
    i.router.set(zmq::sockopt::maxmsgsize, max_frame_bytes);
    if (!i.config.insecure) {
      i.zap.bind("inproc://zeromq.zap.01");
      i.router.set(zmq::sockopt::curve_server, 1);
      i.router.set(zmq::sockopt::curve_secretkey, i.config.server.secret_key);
      i.router.set(zmq::sockopt::zap_domain, "loom");
      i.monitor.set(zmq::sockopt::linger, 0);
      if (zmq_socket_monitor(i.router.handle(), "inproc://loom-gateway-monitor",
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
          == 0)
        i.monitor.connect("inproc://loom-gateway-monitor");
    }
    i.router.bind(i.config.endpoint);
    s->bound_ = i.router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return make_error(errc::invalid_config,
                      fmt::format("gateway cannot bind {}: {}", i.config.endpoint, e.what()));
  }
  i.wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  return s;
}

void zmq_server::run(inbound on_frame) {
  impl_->on_frame = std::move(on_frame);
  thread_ = std::thread([this] { serve(); });
}

void zmq_server::serve() {
  auto& i = *impl_;
  while (true) {
    if (i.stop.load()) {
      // What the gateway queued before the stop (e.g. ServiceStopping) still goes out.
      i.flush_outbox();
      i.router.set(zmq::sockopt::linger, 500);
      return;
    }
    // Saturated: the gateway catches up before the router is read again.
    const bool saturated = i.saturated();
    zmq::pollitem_t items[] = {{i.router.handle(), 0, short(saturated ? 0 : ZMQ_POLLIN), 0},
                               {nullptr, i.wake, ZMQ_POLLIN, 0},
                               {i.zap.handle(), 0, ZMQ_POLLIN, 0},
                               {i.monitor.handle(), 0, ZMQ_POLLIN, 0}};
    int n = i.config.insecure ? 2 : 4;
    try {
      zmq::poll(items, size_t(n), std::chrono::milliseconds{saturated ? 1 : 200});
      if (items[1].revents & ZMQ_POLLIN)
        i.flush_outbox();
      if (n == 4 && (items[2].revents & ZMQ_POLLIN))
        i.answer_zap();
      if (n == 4 && (items[3].revents & ZMQ_POLLIN))
        i.log_handshake_failures();
      if (items[0].revents & ZMQ_POLLIN)
        i.receive();
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR)
        spdlog::error("event=gateway_io_error error=\"{}\"", e.what());
    }
  }
}

void zmq_server::set_clients(std::map<std::string, worker_role> clients) {
  std::lock_guard<std::mutex> guard{impl_->mutex};
  impl_->config.clients = std::move(clients);
}

void zmq_server::send(std::string identity, std::string payload) {
  bool first;
  {
    std::lock_guard<std::mutex> guard{impl_->mutex};
    impl_->outbox.emplace_back(std::move(identity), std::move(payload));
    first = impl_->outbox.size() == 1;
  }
  // The I/O thread takes the whole outbox at once: one wake per batch, not per frame.
  if (first) {
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(impl_->wake, &one, sizeof one);
  }
}

void zmq_server::fence(std::function<bool()> may_send) {
  impl_->fence = std::move(may_send);
}

void zmq_server::handled(size_t bytes) {
  --impl_->frames_in_flight;
  impl_->bytes_in_flight -= bytes;
}

void zmq_server::stop() {
  if (impl_) {
    impl_->stop = true;
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(impl_->wake, &one, sizeof one);
  }
  if (thread_.joinable()) {
    thread_.join();
    // What was queued last (ServiceStopping, answers) reaches the peers before the process
    // may end: closing the context waits for it, up to the router's linger.
    zmq_socket_monitor(impl_->router.handle(), nullptr, 0);
    impl_->monitor.close();
    impl_->router.close();
    impl_->zap.close();
    impl_->context.close();
  }
}

zmq_server::~zmq_server() {
  stop();
}

} // namespace loom
