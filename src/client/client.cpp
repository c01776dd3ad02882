#include "loom/client.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <zmq.hpp>

namespace loom {

std::string read_key(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  in >> key;
  return key.size() == 40 ? key : std::string{};
}

bool call_error::restart_iteration() const {
  return code == v1::ERROR_RESTART_ITERATION;
}

bool call_error::job_ended() const {
  return code == v1::ERROR_JOB_ENDED;
}

namespace {

using clock_type = std::chrono::steady_clock;

/// "tcp://a:1, tcp://b:2" as its endpoints.
std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    auto end = std::min(list.find(',', start), list.size());
    auto e = list.substr(start, end - start);
    e.erase(0, e.find_first_not_of(" \t"));
    e.erase(e.find_last_not_of(" \t") + 1);
    if (!e.empty())
      out.push_back(std::move(e));
    start = end + 1;
  }
  return out;
}

constexpr auto register_retry = std::chrono::milliseconds{500};
constexpr auto register_patience = std::chrono::seconds{3};

std::optional<v1::Phase> phase_of(const std::string& p) {
  if (p == "rollout")
    return v1::PHASE_ROLLOUT;
  if (p == "training")
    return v1::PHASE_TRAINING;
  if (p == "sync")
    return v1::PHASE_SYNC;
  return std::nullopt;
}

std::optional<v1::Role> role_of(const std::string& r) {
  static const std::map<std::string, v1::Role> roles{
    {"rollout", v1::ROLE_ROLLOUT},           {"train", v1::ROLE_TRAIN},
    {"gen-instance", v1::ROLE_GEN_INSTANCE}, {"collective-shim", v1::ROLE_COLLECTIVE_SHIM},
    {"ocs-agent", v1::ROLE_OCS_AGENT},       {"admin", v1::ROLE_ADMIN},
    {"driver", v1::ROLE_DRIVER},             {"gen-router", v1::ROLE_GEN_ROUTER}};
  auto it = roles.find(r);
  return it == roles.end() ? std::nullopt : std::optional{it->second};
}

/// Random per client: the service tells this process's reconnects from another process.
std::string new_incarnation() {
  std::random_device rd;
  char out[17];
  std::snprintf(out, sizeof out, "%016llx",
                static_cast<unsigned long long>(uint64_t(rd()) << 32 | rd()));
  return out;
}

v1::Envelope error_reply(uint64_t rid, v1::ErrorCode code, std::string message) {
  v1::Envelope e;
  e.set_version(1);
  e.set_request_id(rid);
  e.mutable_error()->set_code(code);
  e.mutable_error()->set_message(std::move(message));
  return e;
}

/// Requests the client sends again to the next service: an acquire (nothing ran yet), staging,
/// and a release, which names its grant's iteration so that the service acknowledges one it
/// already counted and says to run the iteration again otherwise; an engine's finished
/// requests and a router's step start, which the service takes once however often they come.
bool sent_again(const v1::Envelope& request) {
  return request.has_phase_acquire() || request.has_phase_release() || request.has_staged()
         || request.has_requests_finished() || request.has_step_start();
}

call_error error_of(const std::optional<v1::Envelope>& reply) {
  if (!reply)
    return {0, "no answer in time"};
  if (reply->has_error())
    return {int(reply->error().code()), reply->error().message()};
  return {v1::ERROR_INTERNAL, "unexpected reply"};
}

} // namespace

/// One ZeroMQ context (and I/O thread) per process, however many clients it opens.
zmq::context_t& shared_context() {
  static zmq::context_t context{1};
  return context;
}

struct client::impl {
  struct pending_call {
    v1::Envelope request;
    std::optional<v1::Envelope> reply;
    // Asynchronous calls: who gets the reply (on the I/O thread); nobody waits for them.
    std::function<void(std::optional<v1::Envelope>)> done;
  };

  client_options options;
  zmq::socket_t socket{shared_context(), zmq::socket_type::dealer};
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  std::string incarnation = new_incarnation();

  mutable std::mutex mutex; // everything below
  std::condition_variable arrived;
  std::map<uint64_t, pending_call> pending;
  std::deque<std::string> outbox; // queued by any thread, taken whole by the I/O thread
  std::deque<v1::Envelope> commands;
  std::function<void(const v1::Envelope&)> callback;
  std::optional<v1::Envelope> registration;
  uint32_t heartbeat_ms = 0;
  uint32_t stats_interval_ms = 0;
  bool lost = false;             // the service no longer knows the session
  uint64_t registering = 0;      // request id of the Register in flight after a loss
  clock_type::time_point register_at;
  std::optional<call_error> fatal; // registering again was refused for good
  std::string waiting;
  // The last grant of each job and phase, whose iteration and group its release names.
  std::map<std::pair<std::string, v1::Phase>, v1::PhaseGrant> grants;
  uint64_t next_id = 1;
  std::atomic<bool> stop{false};
  std::thread io;
  std::deque<std::string> sending; // the I/O thread's: taken from the outbox, not yet sent
  // The link to the service, from the socket's monitor: since when it is down (nothing while
  // it is up), and when it last came back.
  zmq::socket_t monitor{shared_context(), zmq::socket_type::pair};
  std::optional<clock_type::time_point> outage_since;
  int links = 0; // endpoints connected now (a service with [ha] listens on its leader's alone)
  clock_type::time_point back_at{};
  // What the link's handshakes said, for link_diagnosis().
  bool ever_connected = false;
  bool handshake_ok = false;
  bool key_refused = false; // the service's ZAP handler turned this client's key down

  ~impl() {
    if (wake >= 0)
      ::close(wake);
  }

  void notify_io() {
    uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(wake, &one, sizeof one);
  }

  // -- callers ---------------------------------------------------------------------------------

  uint64_t enqueue(v1::Envelope e) {
    std::lock_guard<std::mutex> lock{mutex};
    auto rid = next_id++;
    e.set_version(1);
    e.set_request_id(rid);
    if (fatal && !e.has_register_()) {
      pending[rid] = {e, error_reply(rid, v1::ErrorCode(fatal->code), fatal->message), {}};
      return rid;
    }
    // While the session is being re-established, requests wait for it.
    if (!lost || e.has_register_())
      queue(e.SerializeAsString());
    pending[rid] = {std::move(e), std::nullopt, {}};
    return rid;
  }

  void enqueue_oneway(v1::Envelope e) {
    e.set_version(1);
    auto frame = e.SerializeAsString();
    std::lock_guard<std::mutex> lock{mutex};
    queue(std::move(frame));
  }

  /// Under the mutex. The I/O thread is woken only when the outbox was empty: it takes the
  /// whole outbox at once, so a wake per frame (a syscall and a context switch each) would
  /// find nothing more to send.
  void queue(std::string frame) {
    outbox.push_back(std::move(frame));
    if (outbox.size() == 1)
      notify_io();
  }

  std::optional<v1::Envelope> wait(uint64_t rid, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock{mutex};
    auto ready = [&] { return pending.at(rid).reply.has_value() || stop.load(); };
    if (timeout == no_timeout)
      arrived.wait(lock, ready);
    else
      for (auto deadline = clock_type::now() + timeout;
           !arrived.wait_until(lock, deadline, ready);) {
        auto next = outlasting(clock_type::now(), timeout);
        if (!next)
          break;
        deadline = *next;
      }
    auto reply = std::move(pending.at(rid).reply);
    pending.erase(rid);
    return reply;
  }

  /// A call's deadline passed at `now`: the next one if the service was away meanwhile. A
  /// registered client waits through an outage (up to the limit) and while it registers again,
  /// and gives the service its timeout from when it is back. Under the mutex.
  std::optional<clock_type::time_point> outlasting(clock_type::time_point now,
                                                   std::chrono::milliseconds timeout) const {
    if (!registration || fatal)
      return std::nullopt;
    const auto limit = options.outage_limit;
    if (outage_since)
      return limit != no_timeout && now - *outage_since >= limit
               ? std::nullopt
               : std::optional{now + std::chrono::milliseconds{100}};
    if (lost)
      return now + std::chrono::milliseconds{100};
    if (back_at + timeout > now)
      return back_at + timeout;
    return std::nullopt;
  }

  void say(const std::string& line) const {
    if (options.log)
      options.log(line);
    else
      std::fprintf(stderr, "%s\n", line.c_str());
  }

  /// A monitor event: the link to the service went down or came back.
  void on_link_event() {
    zmq::message_t event;
    zmq::message_t address;
    while (monitor.recv(event, zmq::recv_flags::dontwait)) {
      (void)monitor.recv(address, zmq::recv_flags::dontwait);
      if (event.size() < sizeof(uint16_t))
        continue;
      uint16_t id;
      std::memcpy(&id, event.data(), sizeof id);
      std::lock_guard<std::mutex> lock{mutex};
      const auto now = clock_type::now();
      note_handshake(id);
      if (id == ZMQ_EVENT_CONNECTED)
        ++links;
      if (id == ZMQ_EVENT_DISCONNECTED)
        links = std::max(0, links - 1);
      if (id == ZMQ_EVENT_DISCONNECTED && links == 0 && !outage_since) {
        outage_since = now;
        if (registration)
          say(fmt_line("service_unreachable", "waiting for it to come back"));
      } else if (id == ZMQ_EVENT_CONNECTED && outage_since) {
        auto away = std::chrono::duration<double>(now - *outage_since).count();
        outage_since.reset();
        back_at = now;
        if (registration)
          say(fmt_line("service_reachable", "after " + std::to_string(int(away)) + " s"));
        arrived.notify_all();
      }
    }
  }

  void note_handshake(uint16_t id) {
    ever_connected |= id == ZMQ_EVENT_CONNECTED;
    handshake_ok |= id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
    key_refused |= id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  }

  std::string fmt_line(const char* event, const std::string& what) const {
    return std::string{"loom-client: event="} + event + " endpoint=" + options.endpoint + " "
           + what;
  }

  std::optional<v1::Envelope> call(v1::Envelope e, std::chrono::milliseconds timeout) {
    return wait(enqueue(std::move(e)), timeout);
  }

  void call_async(v1::Envelope e, std::function<void(std::optional<v1::Envelope>)> done) {
    auto rid = enqueue(std::move(e));
    std::unique_lock<std::mutex> lock{mutex};
    auto& call = pending.at(rid);
    if (call.reply) { // answered at once (a refused registration)
      auto reply = std::move(call.reply);
      pending.erase(rid);
      lock.unlock();
      done(std::move(reply));
      return;
    }
    call.done = std::move(done);
  }

  /// Answers of asynchronous calls, taken out to be delivered unlocked. Under the mutex.
  std::vector<std::pair<std::function<void(std::optional<v1::Envelope>)>, v1::Envelope>>
  take_async() {
    std::vector<std::pair<std::function<void(std::optional<v1::Envelope>)>, v1::Envelope>> out;
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second.done && it->second.reply) {
        out.emplace_back(std::move(it->second.done), std::move(*it->second.reply));
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

  // -- the I/O thread (the only user of the socket) -------------------------------------------

  /// The session is gone: phase requests wait to be sent again, other calls in flight are told
  /// to run the iteration again, and a Register goes out. Under the mutex.
  void lose_session() {
    if (!registration)
      return;
    if (!lost) {
      lost = true;
      waiting.clear();
      for (auto& [rid, call] : pending)
        if (!call.reply && !sent_again(call.request) && !call.request.has_register_())
          call.reply = error_reply(rid, v1::ERROR_RESTART_ITERATION,
                                   "the service went away under this request: run the job's "
                                   "iteration again from its rollout");
      arrived.notify_all();
    }
    if (!registering)
      send_registration();
  }

  void send_registration() {
    registering = next_id++;
    register_at = clock_type::now();
    auto again = *registration;
    again.set_request_id(registering);
    outbox.push_back(again.SerializeAsString());
  }

  /// The answer to a Register sent after a loss. Under the mutex.
  void registered_again(const v1::Envelope& e) {
    registering = 0;
    if (e.has_registered()) {
      lost = false;
      heartbeat_ms = e.registered().heartbeat_ms();
      for (auto& [rid, call] : pending)
        if (!call.reply)
          outbox.push_back(call.request.SerializeAsString());
      return;
    }
    auto code = e.has_error() ? e.error().code() : v1::ERROR_INTERNAL;
    if (code == v1::ERROR_STOPPING || code == v1::ERROR_UNAVAILABLE
        || code == v1::ERROR_CONFLICT) {
      register_at = clock_type::now() + register_retry; // the next service, or the old session
      return;
    }
    fatal = call_error{int(code), e.has_error() ? e.error().message() : "registration refused"};
    for (auto& [rid, call] : pending)
      if (!call.reply)
        call.reply = error_reply(rid, code, fatal->message);
    arrived.notify_all();
  }

  bool loses_session(const v1::Envelope& e) const {
    return registration && e.has_error() && e.error().code() == v1::ERROR_NOT_REGISTERED;
  }

  /// A reply is filed, or a command handed on (returned, to run the callback unlocked).
  std::optional<v1::Envelope> take(v1::Envelope e) {
    std::lock_guard<std::mutex> lock{mutex};
    const auto rid = e.request_id();
    if (rid != 0 && rid == registering) {
      registered_again(e);
      return std::nullopt;
    }
    auto it = rid ? pending.find(rid) : pending.end();
    // Any request answered STOPPING (it may cross the ServiceStopping notice) is sent again to
    // the next service if it can be; otherwise that answer is its reply.
    const bool stopping_answer = e.has_error() && e.error().code() == v1::ERROR_STOPPING;
    if (loses_session(e) || e.has_service_stopping() || stopping_answer) {
      lose_session();
      if (it != pending.end() && !sent_again(it->second.request) && !it->second.reply)
        it->second.reply = std::move(e);
      arrived.notify_all();
      return std::nullopt;
    }
    if (it != pending.end()) {
      it->second.reply = std::move(e);
      arrived.notify_all();
      return std::nullopt;
    }
    if (rid != 0)
      return std::nullopt; // a reply nobody waits for any more
    if (e.has_waiting())
      waiting = e.waiting().reason();
    if (callback)
      return e;
    commands.push_back(std::move(e));
    arrived.notify_all();
    return std::nullopt;
  }

  void receive() {
    zmq::message_t msg;
    while (socket.recv(msg, zmq::recv_flags::dontwait)) {
      v1::Envelope e;
      if (!e.ParseFromArray(msg.data(), int(msg.size())))
        continue;
      if (auto command = take(std::move(e))) {
        std::function<void(const v1::Envelope&)> cb;
        {
          std::lock_guard<std::mutex> lock{mutex};
          cb = callback;
        }
        if (cb)
          cb(*command);
      }
      decltype(take_async()) answered;
      {
        std::lock_guard<std::mutex> lock{mutex};
        answered = take_async();
      }
      for (auto& [done, reply] : answered)
        done(std::move(reply));
    }
  }

  /// Sends what is queued, oldest first; what the socket cannot take now (its high-water
  /// mark reached) stays in `sending` until the socket polls writable.
  void flush() {
    {
      std::lock_guard<std::mutex> lock{mutex};
      if (sending.empty())
        sending.swap(outbox);
      else
        for (; !outbox.empty(); outbox.pop_front())
          sending.push_back(std::move(outbox.front()));
    }
    while (!sending.empty()) {
      if (!socket.send(zmq::buffer(sending.front()), zmq::send_flags::dontwait))
        break;
      sending.pop_front();
    }
  }

  /// Heartbeats while the session lives; a Register again while it is lost.
  void tick(clock_type::time_point& next_beat) {
    std::lock_guard<std::mutex> lock{mutex};
    auto now = clock_type::now();
    if (lost && registration && !fatal
        && ((!registering && now >= register_at)
            || (registering && now - register_at > register_patience)))
      send_registration();
    if (!registration || lost || now < next_beat)
      return;
    v1::Envelope hb;
    hb.set_version(1);
    hb.mutable_heartbeat();
    outbox.push_back(hb.SerializeAsString());
    next_beat = now + std::chrono::milliseconds{std::max<uint32_t>(heartbeat_ms / 2, 10)};
  }

  void run() {
    auto next_beat = clock_type::now();
    while (!stop.load()) {
      // Frames the socket could not take wake it when it can (POLLOUT), not at a timeout.
      const short events = sending.empty() ? ZMQ_POLLIN : ZMQ_POLLIN | ZMQ_POLLOUT;
      zmq::pollitem_t items[] = {{socket.handle(), 0, events, 0},
                                 {nullptr, wake, ZMQ_POLLIN, 0},
                                 {monitor.handle(), 0, ZMQ_POLLIN, 0}};
      bool registering_now;
      {
        std::lock_guard<std::mutex> lock{mutex};
        registering_now = lost;
      }
      zmq::poll(items, 3, std::chrono::milliseconds{registering_now ? 20 : 100});
      if (items[1].revents & ZMQ_POLLIN) {
        uint64_t n;
        [[maybe_unused]] auto r = ::read(wake, &n, sizeof n);
      }
      if (items[2].revents & ZMQ_POLLIN)
        on_link_event();
      receive();
      tick(next_beat);
      flush();
    }
    flush(); // a goodbye queued last still goes out
  }
};

client::client(client_options options) : impl_(std::make_unique<impl>()) {
  impl_->options = std::move(options);
  auto& s = impl_->socket;
  s.set(zmq::sockopt::linger, 200);
  s.set(zmq::sockopt::reconnect_ivl, 100);
  s.set(zmq::sockopt::reconnect_ivl_max, 5000);
  if (!impl_->options.server_public_key.empty()) {
    s.set(zmq::sockopt::curve_serverkey, impl_->options.server_public_key);
    s.set(zmq::sockopt::curve_publickey, impl_->options.public_key);
    s.set(zmq::sockopt::curve_secretkey, impl_->options.secret_key);
  }
  // The monitor tells the I/O thread when the link drops and comes back (an outage).
  static std::atomic<uint64_t> monitors{0};
  const auto monitor_at = "inproc://loom-client-monitor-" + std::to_string(monitors++);
  impl_->monitor.set(zmq::sockopt::linger, 0);
  if (zmq_socket_monitor(s.handle(), monitor_at.c_str(),
                         ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED
                           | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
      == 0)
    impl_->monitor.connect(monitor_at);
  auto endpoints = split_endpoints(impl_->options.endpoint);
  if (endpoints.size() > 1) {
    // Replicas ([ha]): frames go only to a connection that is up (the leader's), and a new
    // leader's endpoint is retried often.
    s.set(zmq::sockopt::immediate, true);
    s.set(zmq::sockopt::reconnect_ivl_max, 500);
  }
  for (auto& e : endpoints)
    s.connect(e);
  impl_->io = std::thread([this] { impl_->run(); });
}

client::~client() {
  impl_->stop = true;
  impl_->notify_io();
  impl_->arrived.notify_all();
  if (impl_->io.joinable())
    impl_->io.join();
  // The monitor stops before either socket closes: libzmq sends its events from the shared
  // context's I/O thread and blocks there while nobody reads them, which stalls every socket
  // of the process (seen: a test's clients all silent after one closed while reconnecting).
  zmq_socket_monitor(impl_->socket.handle(), nullptr, 0);
}

std::optional<v1::Envelope> client::call(v1::Envelope request) {
  return impl_->call(std::move(request), impl_->options.timeout);
}

std::optional<v1::Envelope> client::call(v1::Envelope request,
                                         std::chrono::milliseconds timeout) {
  return impl_->call(std::move(request), timeout);
}

void client::call_async(v1::Envelope request,
                        std::function<void(std::optional<v1::Envelope>)> done) {
  impl_->call_async(std::move(request), std::move(done));
}

void client::send(v1::Envelope message) {
  impl_->enqueue_oneway(std::move(message));
}

std::optional<v1::Envelope> client::register_worker(const std::string& role,
                                                    const std::string& worker_id,
                                                    const std::string& job,
                                                    const std::string& node) {
  v1::Register r;
  r.set_role(role_of(role).value_or(v1::ROLE_UNSPECIFIED));
  r.set_worker_id(worker_id);
  r.set_job(job);
  r.set_node(node);
  return register_as(std::move(r));
}

std::optional<v1::Envelope> client::register_as(v1::Register registration) {
  v1::Envelope reg;
  *reg.mutable_register_() = std::move(registration);
  reg.mutable_register_()->set_incarnation(impl_->incarnation);
  auto reply = impl_->call(reg, impl_->options.timeout);
  if (reply && reply->has_registered()) {
    std::lock_guard<std::mutex> lock{impl_->mutex};
    reg.set_version(1);
    impl_->registration = reg;
    impl_->heartbeat_ms = reply->registered().heartbeat_ms();
    impl_->stats_interval_ms = reply->registered().stats_interval_ms();
  }
  return reply;
}

std::optional<v1::Envelope> client::register_engine(const std::string& engine_id,
                                                    const std::string& deployment, uint32_t gpus,
                                                    const std::string& node) {
  v1::Register r;
  r.set_role(v1::ROLE_GEN_INSTANCE);
  r.set_worker_id(engine_id);
  r.set_deployment(deployment);
  r.set_gpus(gpus);
  r.set_node(node);
  return register_as(std::move(r));
}

std::optional<v1::Envelope> client::register_router(const std::string& router_id,
                                                    const std::string& deployment) {
  v1::Register r;
  r.set_role(v1::ROLE_GEN_ROUTER);
  r.set_worker_id(router_id);
  r.set_deployment(deployment);
  return register_as(std::move(r));
}

uint32_t client::stats_interval_ms() const {
  std::lock_guard<std::mutex> lock{impl_->mutex};
  return impl_->stats_interval_ms;
}

void client::gen_stats(v1::GenStats stats) {
  v1::Envelope e;
  *e.mutable_gen_stats() = std::move(stats);
  send(std::move(e));
}

void client::requests_finished(v1::RequestsFinished done,
                               std::function<void(std::optional<call_error>)> answered) {
  v1::Envelope e;
  *e.mutable_requests_finished() = std::move(done);
  impl_->call_async(std::move(e), [answered = std::move(answered)](
                                    std::optional<v1::Envelope> reply) {
    if (!answered)
      return;
    if (reply && reply->has_ok())
      answered(std::nullopt);
    else
      answered(error_of(reply));
  });
}

void client::ack(v1::CommandAck ack) {
  v1::Envelope e;
  *e.mutable_command_ack() = std::move(ack);
  send(std::move(e));
}

outcome<v1::StepPlaced> client::start_step(v1::StepStart step) {
  v1::Envelope e;
  *e.mutable_step_start() = std::move(step);
  auto reply = call(std::move(e));
  if (reply && reply->has_step_placed())
    return {reply->step_placed(), {}};
  return {std::nullopt, error_of(reply)};
}

outcome<v1::FabricDecision> client::fabric_intent(v1::FabricIntent intent) {
  v1::Envelope e;
  *e.mutable_fabric_intent() = std::move(intent);
  auto reply = call(std::move(e));
  if (reply && reply->has_fabric_decision())
    return {reply->fabric_decision(), {}};
  return {std::nullopt, error_of(reply)};
}

outcome<v1::FabricDecision> client::fabric_window(v1::FabricWindow window) {
  v1::Envelope e;
  *e.mutable_fabric_window() = std::move(window);
  auto reply = call(std::move(e));
  if (reply && reply->has_fabric_decision())
    return {reply->fabric_decision(), {}};
  return {std::nullopt, error_of(reply)};
}

std::optional<call_error> client::expert_load(v1::ExpertLoad load) {
  v1::Envelope e;
  *e.mutable_expert_load() = std::move(load);
  auto reply = call(std::move(e));
  if (reply && reply->has_ok())
    return std::nullopt;
  return error_of(reply);
}

std::optional<call_error> client::staged(const std::string& job) {
  v1::Envelope e;
  e.mutable_staged()->set_job(job);
  auto reply = call(e);
  if (reply && reply->has_ok())
    return std::nullopt;
  return error_of(reply);
}

outcome<v1::PhaseGrant> client::acquire(const std::string& job, const std::string& phase,
                                        std::chrono::milliseconds timeout) {
  auto p = phase_of(phase);
  if (!p)
    return {std::nullopt, {v1::ERROR_INVALID, "phase is one of rollout, training, sync"}};
  v1::Envelope e;
  e.mutable_phase_acquire()->set_job(job);
  e.mutable_phase_acquire()->set_phase(*p);
  auto reply = impl_->call(e, timeout);
  if (reply && reply->has_phase_grant()) {
    std::lock_guard<std::mutex> lock{impl_->mutex};
    impl_->grants[{job, *p}] = reply->phase_grant();
    return {reply->phase_grant(), {}};
  }
  return {std::nullopt, error_of(reply)};
}

std::optional<call_error> client::release(const std::string& job, const std::string& phase,
                                          double solo_s, double host_memory_gb) {
  auto p = phase_of(phase);
  if (!p)
    return call_error{v1::ERROR_INVALID, "phase is one of rollout, training, sync"};
  v1::Envelope e;
  e.mutable_phase_release()->set_job(job);
  e.mutable_phase_release()->set_phase(*p);
  e.mutable_phase_release()->set_solo_s(solo_s);
  e.mutable_phase_release()->set_host_memory_gb(host_memory_gb);
  {
    std::lock_guard<std::mutex> lock{impl_->mutex};
    if (auto g = impl_->grants.find({job, *p}); g != impl_->grants.end()) {
      e.mutable_phase_release()->set_iteration(g->second.iteration());
      e.mutable_phase_release()->set_group(g->second.group());
    }
  }
  auto reply = call(e);
  if (reply && reply->has_ok())
    return std::nullopt;
  return error_of(reply);
}

void client::progress(const std::string& job, uint32_t done, uint32_t total) {
  v1::Envelope e;
  e.mutable_progress()->set_job(job);
  e.mutable_progress()->set_responses_done(done);
  e.mutable_progress()->set_responses_total(total);
  send(e);
}

void client::goodbye(const std::string& reason, bool job_finished, bool job_failed) {
  v1::Envelope e;
  e.mutable_goodbye()->set_reason(reason);
  e.mutable_goodbye()->set_job_finished(job_finished);
  e.mutable_goodbye()->set_job_failed(job_failed);
  send(e);
  std::lock_guard<std::mutex> lock{impl_->mutex};
  impl_->registration.reset(); // no heartbeats, no registering again
}

std::optional<v1::Envelope> client::next_command(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock{impl_->mutex};
  impl_->arrived.wait_for(lock, wait, [&] { return !impl_->commands.empty(); });
  if (impl_->commands.empty())
    return std::nullopt;
  auto e = std::move(impl_->commands.front());
  impl_->commands.pop_front();
  return e;
}

void client::on_command(std::function<void(const v1::Envelope&)> callback) {
  std::lock_guard<std::mutex> lock{impl_->mutex};
  impl_->callback = std::move(callback);
}

std::string client::waiting_reason() const {
  std::lock_guard<std::mutex> lock{impl_->mutex};
  return impl_->waiting;
}

std::string client::link_diagnosis() const {
  std::lock_guard<std::mutex> lock{impl_->mutex};
  const auto& i = *impl_;
  const bool curve = !i.options.server_public_key.empty();
  if (i.handshake_ok)
    return {};
  if (i.key_refused)
    return "the service refused this client's key (not among its [security.clients] or "
           "admin keys)";
  if (!i.ever_connected)
    return "nothing accepted a connection at " + i.options.endpoint + " (is the service up?)";
  return curve ? "connected, but the CURVE handshake did not complete: the server key is not "
                 "this service's (a stale server.pub, or the service runs insecure)"
               : "connected, but the handshake did not complete: the service expects CURVE "
                 "(give it its server.pub)";
}

phase_guard::phase_guard(client& c, std::string job, std::string phase,
                         std::chrono::milliseconds timeout)
  : client_(c), job_(std::move(job)), phase_(std::move(phase)) {
  auto granted = client_.acquire(job_, phase_, timeout);
  if (granted)
    granted_ = std::move(*granted);
  else
    error_ = std::move(granted.error);
  since_ = clock_type::now();
}

phase_guard::~phase_guard() {
  done();
}

bool phase_guard::done(double solo_s) {
  if (!granted_ || released_)
    return !error_.code;
  released_ = true;
  if (solo_s < 0)
    solo_s = std::chrono::duration<double>(clock_type::now() - since_).count();
  if (auto err = client_.release(job_, phase_, solo_s)) {
    error_ = std::move(*err);
    return false;
  }
  return true;
}

} // namespace loom
