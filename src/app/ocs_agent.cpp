// `loom ocs-agent` (Opus §4.3): runs next to one optical circuit switch, registers with
// `loom serve` over ZeroMQ (CURVE, role ocs-agent, the device id) and carries the service's
// OcsApply / OcsRead to the switch through the same driver actors serve uses in process: TL1
// over TCP for a real switch (or `loom ocs-emu`), or the emulated switch. It answers each with
// an OcsResult. A service that restarts is registered with again by the client library.

#include <CLI/CLI.hpp>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "app/commands.hpp"
#include "app/logging.hpp"
#include "app/signals.hpp"
#include "config/config_parts.hpp"
#include "drivers/ocs_driver.hpp"
#include "drivers/ocs_wire.hpp"
#include "loom/client.hpp"
#include "protocol/error.hpp"
#include "protocol/type_registry.hpp"

namespace loom {

namespace {

struct agent_settings {
  std::string endpoint = "tcp://127.0.0.1:5555";
  std::string server_key, key, device, worker_id;
  std::string tl1, credentials; // a TL1 switch: HOST:PORT and its USER:PASSWORD file
  std::string emulated;         // or an emulated NxN switch
  int timeout_ms = 2000;
  int attempts = 3;
  double link_up_ms = 0;
};

/// The device the agent drives, as serve would configure it (ocs_device), from its options.
caf::expected<ocs_device> device_of(const agent_settings& s) {
  ocs_device d;
  d.id = s.device;
  d.timeout_ms = s.timeout_ms;
  d.attempts = s.attempts;
  d.link_up_ms = s.link_up_ms;
  if (s.tl1.empty() == s.emulated.empty())
    return make_error(errc::invalid_argument, "give exactly one of --tl1 and --emulated");
  if (!s.emulated.empty()) {
    auto size = parse_switch_size(s.emulated);
    if (!size || size->inputs != size->outputs)
      return make_error(errc::invalid_argument,
                        "--emulated: '" + s.emulated + "' is not NxN with N + N <= 4096");
    d.ports = int(size->inputs);
    return d;
  }
  if (!config_parts::valid_host_port(s.tl1) || s.tl1.ends_with(":0"))
    return make_error(errc::invalid_argument, "--tl1: '" + s.tl1 + "' is not HOST:PORT");
  auto login = config_parts::read_login_file(s.credentials);
  if (!login.error.empty())
    return make_error(errc::invalid_argument, "--credentials: " + login.error);
  d.driver = driver_kind::tl1;
  d.address = s.tl1;
  d.user = login.user;
  d.password = login.password;
  return d;
}

/// Failure code and message of a driver's error (a request that timed out: driver_timeout).
void failed(ocs_reply& out, const caf::error& err) {
  auto code = code_of(err);
  out.failure = uint8_t(code == errc::ok ? errc::driver_timeout : code);
  out.error = render(err);
}

class ocs_agent {
public:
  ocs_agent(const agent_settings& s, client_options c, caf::actor_system& sys,
            ocs_driver_actor driver, caf::timespan patience)
    : s_(s), client_(std::move(c)), sys_(sys), driver_(std::move(driver)), patience_(patience) {}

  int run(const std::atomic<bool>& stop) {
    client_.on_command([this](const v1::Envelope& e) {
      std::lock_guard<std::mutex> lock{mutex_};
      inbox_.push_back(e);
      wake_.notify_one();
    });
    if (int code = register_with_service(stop); code != 0)
      return code;
    while (!stop) {
      std::deque<v1::Envelope> batch;
      {
        std::unique_lock<std::mutex> lock{mutex_};
        wake_.wait_for(lock, std::chrono::milliseconds{200}, [&] { return !inbox_.empty(); });
        batch.swap(inbox_);
      }
      for (auto& e : batch)
        if (auto r = ocs_wire::request_of(e))
          client_.send(ocs_wire::result(answer(*r)));
    }
    client_.goodbye("stopped", false);
    spdlog::info("event=ocs_agent_stopped device={}", s_.device);
    return 0;
  }

  /// Wakes run() to notice `stop`.
  void wake() { wake_.notify_all(); }

private:
  /// No answer (the service is not up yet) or a conflict (the previous agent of the device
  /// has not gone silent yet) is tried again; any other refusal is final.
  int register_with_service(const std::atomic<bool>& stop) {
    v1::Register r;
    r.set_role(v1::ROLE_OCS_AGENT);
    r.set_worker_id(s_.worker_id);
    r.set_device(s_.device);
    while (!stop) {
      auto reply = client_.register_as(r);
      if (reply && reply->has_registered()) {
        spdlog::info("event=ocs_agent_registered device={} worker={} endpoint={}", s_.device,
                     s_.worker_id, s_.endpoint);
        return 0;
      }
      if (reply && reply->has_error() && reply->error().code() != v1::ERROR_CONFLICT) {
        spdlog::error("event=ocs_agent_refused device={} error=\"{}\"", s_.device,
                      reply->error().message());
        return 1;
      }
      std::unique_lock<std::mutex> lock{mutex_};
      wake_.wait_for(lock, std::chrono::milliseconds{500}, [&] { return stop.load(); });
    }
    return 0;
  }

  ocs_reply answer(const ocs_request& r) {
    ocs_reply out;
    out.device = r.device;
    out.id = r.id;
    if (r.device != s_.device) {
      out.failure = uint8_t(errc::driver_refused);
      out.error = "this agent drives '" + s_.device + "', not '" + r.device + "'";
      return out;
    }
    caf::scoped_actor self{sys_};
    if (r.kind == ocs_request_kind::apply) {
      self->request(driver_, patience_, apply_atom::value, r.diff)
        .receive([&](apply_report& rep) { out.report = rep; },
                 [&](caf::error& err) { failed(out, err); });
      spdlog::info("event=ocs_agent_apply device={} removes={} adds={} ok={} latency_ms={:.1f} "
                   "error=\"{}\"",
                   s_.device, r.diff.removes.size(), r.diff.adds.size(), out.failure == 0,
                   double(out.report.latency_ns) / 1e6, out.error);
      return out;
    }
    self->request(driver_, patience_, get_atom::value)
      .receive([&](std::vector<cross_connect>& xcs) { out.cross_connects = std::move(xcs); },
               [&](caf::error& err) { failed(out, err); });
    self->request(driver_, patience_, health_atom::value)
      .receive([&](driver_health& h) { out.health = std::move(h); },
               [&](caf::error& err) { failed(out, err); });
    if (out.failure == 0 && !out.health.connected) {
      out.failure = uint8_t(errc::driver_unreachable);
      out.error = out.health.last_error;
    }
    return out;
  }

  const agent_settings& s_;
  client client_;
  caf::actor_system& sys_;
  ocs_driver_actor driver_;
  caf::timespan patience_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<v1::Envelope> inbox_;
};

int run_agent(const agent_settings& s) {
  auto device = device_of(s);
  if (!device) {
    std::fprintf(stderr, "ocs-agent: %s\n", message_of(device.error()).c_str());
    return exit_config_error;
  }
  client_options c;
  c.endpoint = s.endpoint;
  if (!s.server_key.empty()) {
    c.server_public_key = read_key(s.server_key);
    c.public_key = read_key(s.key + ".pub");
    c.secret_key = read_key(s.key + ".secret");
    if (c.server_public_key.empty() || c.public_key.empty() || c.secret_key.empty()) {
      std::fprintf(stderr, "ocs-agent: cannot read --server-key %s or --key %s.pub/.secret\n",
                   s.server_key.c_str(), s.key.c_str());
      return exit_config_error;
    }
  }
  block_service_signals();
  caf::actor_system_config cfg;
  register_loom_types(cfg);
  caf::actor_system sys{cfg};
  auto driver = spawn_ocs_driver(sys, *device);
  const auto patience = std::chrono::milliseconds{2 * s.timeout_ms * s.attempts + 1000};
  ocs_agent agent{s, std::move(c), sys, *driver, caf::timespan{patience}};
  spdlog::info("event=ocs_agent_started device={} switch={} endpoint={}", s.device,
               s.tl1.empty() ? "emulated " + s.emulated : "tl1 " + s.tl1, s.endpoint);
  std::atomic<bool> stop{false};
  int code = 0;
  std::thread loop{[&] {
    code = agent.run(stop);
    if (code != 0)
      kill(getpid(), SIGTERM); // ends the wait below
  }};
  while (await_service_signal() == SIGHUP)
    spdlog::info("event=reload_ignored reason=\"the agent's settings are its command line\"");
  stop = true;
  agent.wake();
  loop.join();
  caf::anon_send_exit(*driver, caf::exit_reason::user_shutdown);
  return code;
}

class ocs_agent_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "ocs-agent", "Drive one optical circuit switch for a running serve, from next to it\n"
                   "(Opus §4.3): registers over ZeroMQ as the device's agent (its config says\n"
                   "driver = \"zmq\") and applies and reads back what serve asks, over TL1\n"
                   "(--tl1, e.g. a `loom ocs-emu`) or on an emulated switch (--emulated).\n"
                   "Runs until SIGINT/SIGTERM.");
    cmd_->add_option("--endpoint", s_.endpoint,
                     "The service's gateway; several, comma-separated, for the replicas of a\n"
                     "service with [ha] (the agent follows its leader)")
      ->capture_default_str();
    cmd_->add_option("--server-key", s_.server_key,
                     "The service's public key file (omit if it runs insecure)");
    cmd_->add_option("--key", s_.key, "This agent's ocs-agent key pair prefix (KEY.pub, KEY.secret)");
    cmd_->add_option("--device", s_.device, "The OCS device id in serve's config")->required();
    cmd_->add_option("--id", s_.worker_id, "The agent's worker id; default: ocs-agent-DEVICE");
    cmd_->add_option("--tl1", s_.tl1, "The switch's TL1 agent, HOST:PORT");
    cmd_->add_option("--credentials", s_.credentials,
                     "With --tl1: the switch login file (USER:PASSWORD, one line)");
    cmd_->add_option("--emulated", s_.emulated, "Drive an emulated NxN switch instead");
    cmd_->add_option("--timeout-ms", s_.timeout_ms, "Per switch command, and for connecting")
      ->check(CLI::Range(1, 600'000))
      ->capture_default_str();
    cmd_->add_option("--attempts", s_.attempts, "Per operation, reconnecting between")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
    cmd_->add_option("--link-up-ms", s_.link_up_ms,
                     "NIC link-up after a change, reported with each apply (mFabric §6)")
      ->check(CLI::Range(0.0, 60'000.0))
      ->capture_default_str();
    add_log_level(*cmd_, level_, "Log level");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    setup_logging(level_named(level_));
    if (s_.worker_id.empty())
      s_.worker_id = "ocs-agent-" + s_.device;
    return run_agent(s_);
  }

private:
  CLI::App* cmd_ = nullptr;
  agent_settings s_;
  std::string level_ = "info";
};

} // namespace

std::unique_ptr<subcommand> ocs_agent_subcommand() {
  return std::make_unique<ocs_agent_command>();
}

} // namespace loom
