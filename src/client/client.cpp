#include "loom/client.hpp"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <zmq.hpp>

#include "loom.pb.h"

namespace loom {

std::string read_key(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  in >> key;
  return key.size() == 40 ? key : std::string{};
}

namespace {

constexpr auto slice = std::chrono::milliseconds{5};

std::optional<v1::Phase> phase_of(const std::string& p) {
  if (p == "rollout")
    return v1::PHASE_ROLLOUT;
  if (p == "training")
    return v1::PHASE_TRAINING;
  if (p == "sync")
    return v1::PHASE_SYNC;
  return std::nullopt;
}

} // namespace

/// One ZeroMQ context (and I/O thread) per process, however many clients it opens.
zmq::context_t& shared_context() {
  static zmq::context_t context{1};
  return context;
}

struct client::impl {
  client_options options;
  zmq::socket_t socket{shared_context(), zmq::socket_type::dealer};
  std::mutex io;                         // the socket
  std::mutex state;                      // everything below
  std::condition_variable arrived;
  std::map<uint64_t, v1::Envelope> replies;
  std::deque<v1::Envelope> commands;
  std::function<void(const v1::Envelope&)> callback;
  std::atomic<uint64_t> next_id{1};
  std::optional<v1::Envelope> registration;
  std::atomic<uint32_t> heartbeat_ms{0};
  std::atomic<bool> stop{false};
  std::thread beats;

  void send_now(const v1::Envelope& e) {
    auto bytes = e.SerializeAsString();
    std::lock_guard<std::mutex> guard{io};
    socket.send(zmq::buffer(bytes), zmq::send_flags::none);
  }

  /// One poll slice: whatever arrives is filed as a reply or a command.
  void pump(std::chrono::milliseconds wait) {
    std::vector<v1::Envelope> got;
    {
      std::lock_guard<std::mutex> guard{io};
      zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, wait) <= 0)
        return;
      zmq::message_t msg;
      while (socket.recv(msg, zmq::recv_flags::dontwait)) {
        v1::Envelope e;
        if (e.ParseFromArray(msg.data(), int(msg.size())))
          got.push_back(std::move(e));
      }
    }
    std::function<void(const v1::Envelope&)> cb;
    {
      std::lock_guard<std::mutex> guard{state};
      cb = callback;
      for (auto& e : got) {
        if (e.request_id() != 0)
          replies[e.request_id()] = std::move(e);
        else if (!cb)
          commands.push_back(std::move(e));
      }
    }
    if (cb)
      for (auto& e : got)
        if (e.request_id() == 0)
          cb(e);
    arrived.notify_all();
  }

  std::optional<v1::Envelope> wait_for(uint64_t id, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      {
        std::unique_lock<std::mutex> lock{state};
        auto it = replies.find(id);
        if (it != replies.end()) {
          auto e = std::move(it->second);
          replies.erase(it);
          return e;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return std::nullopt;
      pump(std::min(left, slice));
    }
  }

  std::optional<v1::Envelope> request(v1::Envelope e, std::chrono::milliseconds timeout) {
    auto id = next_id++;
    e.set_version(1);
    e.set_request_id(id);
    send_now(e);
    return wait_for(id, timeout);
  }

  std::optional<v1::Envelope> call(const v1::Envelope& e, std::chrono::milliseconds timeout) {
    auto reply = request(e, timeout);
    // A restarted service has lost the session: register again under the same id, then retry.
    std::optional<v1::Envelope> reg;
    {
      std::lock_guard<std::mutex> guard{state};
      reg = registration;
    }
    if (reply && reply->has_error() && reply->error().code() == v1::ERROR_NOT_REGISTERED && reg) {
      auto again = request(*reg, timeout);
      if (!again || !again->has_registered())
        return reply;
      // The restarted service re-admits the job from the start of an iteration: a phase in
      // flight is not resent, the framework restarts its iteration (and is told so).
      if (e.has_phase_acquire() || e.has_phase_release()) {
        reply->mutable_error()->set_message("session re-established after a service restart: "
                                            "restart the iteration");
        return reply;
      }
      reply = request(e, timeout);
    }
    return reply;
  }

  void start_heartbeats() {
    if (beats.joinable())
      return;
    beats = std::thread([this] {
      while (!stop) {
        auto every = std::chrono::milliseconds{std::max<uint32_t>(heartbeat_ms / 2, 1)};
        auto until = std::chrono::steady_clock::now() + every;
        while (!stop && std::chrono::steady_clock::now() < until) {
          // With a callback, non-blocking looks keep commands flowing while no call waits,
          // without holding the socket from callers; without one, callers pump.
          bool pushing;
          {
            std::lock_guard<std::mutex> guard{state};
            pushing = static_cast<bool>(callback);
          }
          if (pushing)
            pump(std::chrono::milliseconds{0});
          std::this_thread::sleep_for(std::chrono::milliseconds{pushing ? 10 : 50});
        }
        v1::Envelope hb;
        hb.set_version(1);
        hb.mutable_heartbeat();
        send_now(hb);
      }
    });
  }
};

client::client(client_options options) : impl_(std::make_unique<impl>()) {
  impl_->options = std::move(options);
  auto& s = impl_->socket;
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::reconnect_ivl, 100);
  s.set(zmq::sockopt::reconnect_ivl_max, 5000);
  if (!impl_->options.server_public_key.empty()) {
    s.set(zmq::sockopt::curve_serverkey, impl_->options.server_public_key);
    s.set(zmq::sockopt::curve_publickey, impl_->options.public_key);
    s.set(zmq::sockopt::curve_secretkey, impl_->options.secret_key);
  }
  s.connect(impl_->options.endpoint);
}

client::~client() {
  impl_->stop = true;
  if (impl_->beats.joinable())
    impl_->beats.join();
}

std::optional<v1::Envelope> client::call(v1::Envelope request) {
  return impl_->call(std::move(request), impl_->options.timeout);
}

void client::send(v1::Envelope message) {
  message.set_version(1);
  impl_->send_now(message);
}

std::optional<v1::Envelope> client::register_worker(const std::string& role,
                                                    const std::string& worker_id,
                                                    const std::string& job,
                                                    const std::string& node) {
  v1::Envelope reg;
  auto* r = reg.mutable_register_();
  static const std::map<std::string, v1::Role> roles{
    {"rollout", v1::ROLE_ROLLOUT},           {"train", v1::ROLE_TRAIN},
    {"gen-instance", v1::ROLE_GEN_INSTANCE}, {"collective-shim", v1::ROLE_COLLECTIVE_SHIM},
    {"ocs-agent", v1::ROLE_OCS_AGENT},       {"admin", v1::ROLE_ADMIN}};
  auto it = roles.find(role);
  r->set_role(it == roles.end() ? v1::ROLE_UNSPECIFIED : it->second);
  r->set_worker_id(worker_id);
  r->set_job(job);
  r->set_node(node);
  auto reply = impl_->request(reg, impl_->options.timeout);
  if (reply && reply->has_registered()) {
    {
      std::lock_guard<std::mutex> guard{impl_->state};
      impl_->registration = reg;
    }
    impl_->heartbeat_ms = reply->registered().heartbeat_ms();
    impl_->start_heartbeats();
  }
  return reply;
}

std::optional<v1::PhaseGrant> client::acquire(const std::string& job, const std::string& phase,
                                              std::chrono::milliseconds timeout) {
  auto p = phase_of(phase);
  if (!p)
    return std::nullopt;
  v1::Envelope e;
  e.mutable_phase_acquire()->set_job(job);
  e.mutable_phase_acquire()->set_phase(*p);
  auto reply = impl_->call(e, timeout);
  if (!reply || !reply->has_phase_grant())
    return std::nullopt;
  return reply->phase_grant();
}

bool client::release(const std::string& job, const std::string& phase, double solo_s) {
  auto p = phase_of(phase);
  if (!p)
    return false;
  v1::Envelope e;
  e.mutable_phase_release()->set_job(job);
  e.mutable_phase_release()->set_phase(*p);
  e.mutable_phase_release()->set_solo_s(solo_s);
  auto reply = call(e);
  return reply && reply->has_ok();
}

std::optional<v1::Envelope> client::next_command(std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    {
      std::lock_guard<std::mutex> guard{impl_->state};
      if (!impl_->commands.empty()) {
        auto e = std::move(impl_->commands.front());
        impl_->commands.pop_front();
        return e;
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return std::nullopt;
    impl_->pump(std::min(left, slice));
  }
}

void client::on_command(std::function<void(const v1::Envelope&)> callback) {
  std::lock_guard<std::mutex> guard{impl_->state};
  impl_->callback = std::move(callback);
}

} // namespace loom
