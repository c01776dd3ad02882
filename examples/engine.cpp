// An inference engine process on libloomclient (OrchestrRL §4, role gen-instance): one node's
// server, hosting the instances of a generation deployment that Loom lays over its GPUs. It
// reports every instance's load each monitoring tick (GenStats) and the requests it finishes
// (RequestsFinished), and obeys Loom's commands: Reconfigure (drain, then reshard), AdmitRequests
// and MigrateRequests, each answered with a CommandAck.
//
// Its "GPUs" are the engine simulator replay uses (engine_sim over instance_sim), run at
// wall-clock speed times --time-scale, with the requests and lengths of a generation scenario
// (the prompts an engine would receive from the framework's router). An adapter for a real
// engine (vLLM, SGLang) keeps the wire side and replaces the simulator: docs/protocol.md maps
// each field to what such engines expose. Run with --help.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>

#include "examples/example_support.hpp"
#include "generation/engine_sim.hpp"
#include "loom/client.hpp"
#include "records/gen_proto.hpp"
#include "replay/gen_scenario.hpp"

namespace {

std::atomic<bool> stopping{false};

struct settings {
  loom::client_options client;
  std::string server_key, key, deployment = "gen", id = "engine-0", node, scenario;
  std::string config = "TP1";
  uint32_t gpus = 8;
  double time_scale = 1;
};

using loom::example::say;

using steady = std::chrono::steady_clock;

class engine_process {
public:
  engine_process(const settings& s, const loom::replay::gen_scenario& sc,
                 loom::parallel_config loaded)
    : s_(s), model_(engine_of(sc)), client_(s.client),
      sim_(model_, s.id, loaded, loom::engine_sim_costs_of(sc.planner),
           [steps = sc.steps](uint64_t id) {
             auto sample = loom::replay::sample_of(steps, id);
             return sample ? sample->output_tokens : int64_t{1};
           }) {}

  int run() {
    // Commands may come before the answer to Register: the callback is in place first.
    client_.on_command([this](const loom::v1::Envelope& e) {
      std::lock_guard<std::mutex> lock{mutex_};
      inbox_.push_back(e);
      wake_.notify_one();
    });
    // The service may not be up yet: no answer is retried, a refusal is final.
    auto reg = client_.register_engine(s_.id, s_.deployment, s_.gpus, s_.node);
    while (!reg && !stopping)
      reg = client_.register_engine(s_.id, s_.deployment, s_.gpus, s_.node);
    if (!reg || !reg->has_registered()) {
      std::fprintf(stderr, "register failed: %s\n",
                   reg && reg->has_error() ? reg->error().message().c_str() : "no answer");
      return 1;
    }
    interval_ = std::chrono::milliseconds{std::max<uint32_t>(1, client_.stats_interval_ms())};
    say("engine %s registered with %s (tick %u ms)", s_.id.c_str(), s_.deployment.c_str(),
        unsigned(interval_.count()));
    auto next_tick = aligned_tick();
    while (!stopping) {
      run_commands();
      answer_due();
      if (steady::now() >= next_tick) {
        if (!tick())
          return 1;
        next_tick = aligned_tick();
      }
      wait_until(next_tick);
    }
    client_.goodbye("stopped", false);
    say("engine %s stopped", s_.id.c_str());
    return 0;
  }

private:
  double sim_now() const {
    return std::chrono::duration<double>(steady::now() - start_).count() * s_.time_scale;
  }

  /// The wall clock at engine time t (the finish times Loom and the router compare).
  int64_t wall_ns(double t) const {
    return wall_start_ns_ + std::llround(t / s_.time_scale * 1e9);
  }

  /// Ticks fall on wall-clock multiples of the interval, so engines on one clock report
  /// together (as replay's engines do).
  steady::time_point aligned_tick() const {
    auto wall = std::chrono::system_clock::now().time_since_epoch();
    auto next = (wall / interval_ + 1) * interval_;
    return steady::now() + std::chrono::duration_cast<steady::duration>(next - wall);
  }

  void wait_until(steady::time_point t) {
    if (!due_.empty())
      t = std::min(t, due_.begin()->first);
    std::unique_lock<std::mutex> lock{mutex_};
    wake_.wait_until(lock, t, [&] { return !inbox_.empty() || stopping; });
  }

  void run_commands() {
    std::deque<loom::v1::Envelope> batch;
    {
      std::lock_guard<std::mutex> lock{mutex_};
      batch.swap(inbox_);
    }
    for (auto& e : batch) {
      if (e.has_service_stopping())
        say("service stopping: %s", e.service_stopping().reason().c_str());
      auto c = loom::command_of(e, s_.id);
      if (!c)
        continue;
      const double t = sim_now();
      auto answer = sim_.apply(*c, t);
      say("command %llu %s: %s", static_cast<unsigned long long>(c->id),
          std::string{to_string(c->kind)}.c_str(), answer.ack.ok ? "ok" : answer.ack.detail.c_str());
      report_finished(); // before the answer: what finished left before it
      auto at = steady::now() + std::chrono::duration_cast<steady::duration>(
                                  std::chrono::duration<double>((answer.due_s - t) / s_.time_scale));
      due_.emplace(at, std::move(answer.ack));
    }
  }

  void answer_due() {
    while (!due_.empty() && due_.begin()->first <= steady::now()) {
      loom::v1::CommandAck ack;
      loom::fill(ack, due_.begin()->second, s_.deployment);
      client_.ack(std::move(ack));
      due_.erase(due_.begin());
    }
  }

  bool tick() {
    sim_.advance_to(sim_now());
    if (auto why = sim_.stuck()) {
      std::fprintf(stderr, "engine %s: %s\n", s_.id.c_str(), why->c_str());
      return false;
    }
    report_finished();
    for (auto& st : sim_.stats()) {
      loom::v1::GenStats m;
      loom::fill(m, st, s_.deployment);
      client_.gen_stats(std::move(m));
    }
    return true;
  }

  void report_finished() {
    std::map<uint64_t, loom::v1::RequestsFinished> per_step;
    for (auto& f : sim_.take_finished()) {
      auto& m = per_step[f.step];
      m.set_deployment(s_.deployment);
      m.set_step(f.step);
      loom::fill(*m.add_requests(), loom::request_done{f.id, f.output_tokens, wall_ns(f.at_s)});
    }
    for (auto& [step, m] : per_step) {
      say("finished %d of step %llu", m.requests_size(), static_cast<unsigned long long>(step));
      client_.requests_finished(std::move(m), [](std::optional<loom::call_error> err) {
        if (err)
          say("finished report refused: %s", err->message.c_str());
      });
    }
  }

  const settings& s_;
  loom::engine_model model_;
  loom::client client_;
  loom::engine_sim sim_;
  steady::time_point start_ = steady::now();
  int64_t wall_start_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::chrono::milliseconds interval_{500};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<loom::v1::Envelope> inbox_;
  std::multimap<steady::time_point, loom::command_ack> due_;
};

void on_signal(int) {
  stopping = true;
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"A simulated inference engine (loom.v1 gen-instance) for a Loom generation "
               "deployment:\nengine_sim at wall-clock speed x --time-scale, obeying Loom's "
               "commands."};
  loom::example::add_connection_options(app, s.client, s.server_key, s.key, "This engine's");
  app.add_option("--deployment", s.deployment, "The deployment it serves")->capture_default_str();
  app.add_option("--engine-id", s.id, "Its id (the session's worker id)")->capture_default_str();
  app.add_option("--node", s.node, "The node it runs on");
  app.add_option("--gpus", s.gpus, "Its GPUs")->capture_default_str();
  app.add_option("--scenario", s.scenario, "Generation scenario: model, GPU, costs and requests")
    ->required()
    ->check(CLI::ExistingFile);
  app.add_option("--config", s.config, "The parallel config it runs at start (TP4, EP16/TP2, ...)")
    ->capture_default_str();
  app.add_option("--time-scale", s.time_scale, "Engine seconds per wall-clock second")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto loaded = loom::parallel_config::parse(s.config);
  if (!loaded) {
    std::fprintf(stderr, "--config: '%s' is not a parallel config\n", s.config.c_str());
    return 2;
  }
  auto sc = loom::replay::load_gen_scenario(s.scenario);
  if (!sc.value) {
    for (auto& e : sc.errors)
      std::fprintf(stderr, "%s\n", e.to_string().c_str());
    return 2;
  }
  if (!loom::example::load_keys(s.client, s.server_key, s.key))
    return 2;
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  engine_process engine{s, *sc.value, *loaded};
  return engine.run();
}
