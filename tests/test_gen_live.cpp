// Live generation (OrchestrRL §4) with real processes: `loom serve` hosting a deployment's
// controller, planner and balancer; `loom-example-engine` processes (the engine simulator
// replay uses, at 20x wall-clock speed) as its engines over ZeroMQ with CURVE; the test as
// the framework's router. A step goes from a throughput config to a latency one in its tail,
// a straggler's requests migrate, an engine is killed mid-step, serve is killed mid-step, and
// `loom drive` plays a scenario live as replay decides it.

#define BOOST_TEST_MODULE gen_live
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loom.pb.h"
#include "loom/client.hpp"
#include "records/codecs.hpp"
#include "store/database.hpp"
#include "tests/support/live_service.hpp"

using namespace loom;
namespace lt = loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr double time_scale = 20; // engine seconds per wall-clock second

/// A deployment of two 8-GPU engines, its tick and period divided by the time scale.
std::string deployment_text(const std::string& initial, bool planner, bool balancer,
                            double theta = 0.05) {
  return fmt::format(R"(
[[generation.deployments]]
name = "gen"
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 16
gpus_per_node = 8
initial = "{}"
max_tokens = 8192
planner = {}
balancer = {}
theta = {}
period_s = {}
tick_ms = {}
command_timeout_s = 2
)",
                     initial, planner, balancer, theta, 5 / time_scale, 1000 / time_scale);
}

/// The engines' scenario: `steps` batches of requests with prompts of 300 tokens and these
/// output lengths (a trace of the Azure CSV's form).
std::string scenario_file(const lt::live_service& s, int steps,
                          const std::vector<int64_t>& lengths) {
  std::string csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (auto n : lengths)
    csv += fmt::format("2023-11-16 18:15:46.6805900,300,{}\n", n);
  lt::write_file(s.dir / "lengths.csv", csv);
  auto path = s.dir / "gen.toml";
  lt::write_file(path, fmt::format(R"([scenario]
name = "gen"
kind = "generation"
policies = ["orchestr"]
[deployment]
model = "Qwen2.5-14B"
gpu = "H800"
gpus = 16
[workload]
steps = {}
batch = {}
max_tokens = 8192
trace = "lengths.csv"
)",
                                   steps, lengths.size()));
  return path;
}

/// Most requests short, every `every`-th long.
std::vector<int64_t> two_lengths(size_t n, size_t every, int64_t shorter, int64_t longer) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < n; ++i)
    out.push_back(i % every == 0 ? longer : shorter + int64_t(i % 7) * 10);
  return out;
}

std::unique_ptr<lt::child_process> start_engine(const lt::live_service& s, const std::string& who,
                                                const std::string& scenario,
                                                const std::string& config) {
  return s.engine(who, {"--deployment", "gen", "--gpus", "8", "--node", who, "--scenario",
                        scenario, "--config", config, "--time-scale",
                        fmt::format("{}", time_scale)});
}

/// The framework's router, in the test: starts steps and waits for their end.
class router {
public:
  /// `from_zero`: each step's requests are numbered 0..n-1 (ids unique within a step only).
  explicit router(const lt::live_service& s, bool from_zero = false,
                  const std::string& id = "router")
    : client_(options(s)), from_zero_(from_zero) {
    auto r = client_.register_router(id, "gen");
    BOOST_REQUIRE_MESSAGE(r && r->has_registered(),
                          (r && r->has_error() ? r->error().message() : "no answer"));
  }

  v1::StepPlaced start(uint64_t step, size_t requests) {
    v1::StepStart m;
    m.set_deployment("gen");
    m.set_step(step);
    for (size_t i = 0; i < requests; ++i) {
      auto* r = m.add_requests();
      r->set_request(from_zero_ ? i : step << 32 | i);
      r->set_prompt_tokens(300);
    }
    auto placed = client_.start_step(m);
    BOOST_REQUIRE_MESSAGE(placed, placed.error.message);
    return *placed;
  }

  /// When the step ended (its latest finish), or nothing within the limit. The router never
  /// asks again: a StepDone sent while it was away (a restarted service) must reach it when
  /// it registers again.
  std::optional<int64_t> done(uint64_t step, size_t requests) {
    auto d = step_done(step);
    if (!d)
      return std::nullopt;
    BOOST_CHECK_EQUAL(d->requests(), requests);
    BOOST_CHECK_MESSAGE(!d->aborted(), d->reason());
    return d->last_finished_at_ns();
  }

  /// The StepDone of `step`, as the service sent it, or nothing within the limit.
  std::optional<v1::StepDone> step_done(uint64_t step) {
    auto deadline = std::chrono::steady_clock::now() + lt::live_limit;
    while (std::chrono::steady_clock::now() < deadline)
      if (auto c = client_.next_command(200ms); c && c->has_step_done()
                                                   && c->step_done().step() == step)
        return c->step_done();
    return std::nullopt;
  }

private:
  static client_options options(const lt::live_service& s) {
    auto o = s.keys("router");
    o.timeout = 30s;
    return o;
  }
  client client_;
  bool from_zero_ = false;
};

json generation_of(const lt::live_service& s) {
  auto r = s.admin({"generation", "--json"});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  auto all = json::parse(r.out);
  BOOST_REQUIRE_EQUAL(all.size(), 1u);
  return all[0];
}

/// Waits until the deployment serves its whole first layout.
void await_layout(const lt::live_service& s, size_t instances) {
  for (int i = 0; i < 400; ++i) {
    auto g = generation_of(s);
    if (g["instances"].size() == instances && g["engines"].size() == 2
        && g["reconfiguring"] == "")
      return;
    std::this_thread::sleep_for(50ms);
  }
  BOOST_FAIL("the engines did not register");
}

struct engine_pair {
  std::unique_ptr<lt::child_process> a, b;
};

/// engine-a and engine-b, 8 GPUs each, playing one step of `lengths` as `config` ("TPn"),
/// once the deployment serves them.
engine_pair start_engines(const lt::live_service& s, const std::vector<int64_t>& lengths,
                          const std::string& config) {
  auto scenario = scenario_file(s, 1, lengths);
  engine_pair p{start_engine(s, "engine-a", scenario, config),
                start_engine(s, "engine-b", scenario, config)};
  await_layout(s, size_t(16 / std::stoi(config.substr(2))));
  return p;
}

/// The events of a stopped service's store, as "kind detail".
std::vector<std::string> events_in(const std::string& db_dir) {
  auto db = database::open(db_dir);
  BOOST_REQUIRE_MESSAGE(db, "cannot open " << db_dir);
  auto records = (*db)->read_events(0, 100000);
  BOOST_REQUIRE(records);
  std::vector<std::string> out;
  for (auto& r : *records)
    if (auto e = decode_event(r.value))
      out.push_back(std::string{to_string(e->event.kind)} + " " + e->event.detail);
  return out;
}

/// The widest TP degree of a deployment name such as "2xTP8" or "4xTP2+1xTP8".
int tp_of(const json& name) {
  auto text = name.get<std::string>();
  int widest = 0;
  for (auto at = text.find("TP"); at != std::string::npos; at = text.find("TP", at + 2))
    widest = std::max(widest, std::stoi(text.substr(at + 2)));
  return widest;
}

size_t count_prefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return size_t(std::count_if(lines.begin(), lines.end(),
                              [&](auto& l) { return l.rfind(prefix, 0) == 0; }));
}

/// The service's /metrics page (its port is in the serve log).
std::string metrics_of(lt::child_process& serve) {
  for (auto& l : serve.stderr_lines())
    if (auto at = l.find("event=metrics_listening"); at != std::string::npos)
      return lt::http_get(std::stoi(l.substr(l.find("port=", at) + 5)), "/metrics");
  return {};
}

} // namespace

BOOST_AUTO_TEST_CASE(the_tail_switches_to_a_latency_config_acknowledged_and_persisted) {
  lt::live_service s{{.fabric = false, .extra = deployment_text("TP4", true, false)}};
  auto serve = s.serve();
  auto [a, b] = start_engines(s, two_lengths(128, 32, 300, 6000), "TP4");
  router r{s};
  auto placed = r.start(0, 128);
  BOOST_CHECK_EQUAL(placed.placements_size(), 128);
  BOOST_CHECK(!placed.placements(0).engine().empty());
  BOOST_REQUIRE_MESSAGE(r.done(0, 128), "the step did not end");
  auto g = generation_of(s);
  BOOST_TEST_MESSAGE("live tail: " << g.dump());
  BOOST_CHECK_GE(g["reconfigurations"].get<int>(), 1);
  // The tail runs on wider instances than the batch did (a latency config: TP8 or TP16).
  BOOST_CHECK_GT(tp_of(g["current"]), 4);
  // Every engine answered the drain, the reshard and (the leaders) the admits.
  for (auto* e : {a.get(), b.get()}) {
    auto lines = e->stdout_lines();
    BOOST_CHECK_GE(count_prefix(lines, "command"), 3u);
    BOOST_CHECK(std::any_of(lines.begin(), lines.end(),
                            [](auto& l) { return l.find("drain: ok") != std::string::npos; }));
    BOOST_CHECK(std::any_of(lines.begin(), lines.end(),
                            [](auto& l) { return l.find("reshard: ok") != std::string::npos; }));
  }
  // Operators see the same on /metrics.
  auto metrics = metrics_of(*serve);
  for (auto line : {fmt::format("loom_gen_reconfigurations_total{{deployment=\"gen\"}} {}",
                                g["reconfigurations"].get<int>()),
                    std::string{"loom_gen_steps_total{deployment=\"gen\"} 1"},
                    std::string{"loom_gen_solve_seconds_count"}})
    BOOST_CHECK_MESSAGE(metrics.find(line) != std::string::npos, "missing " << line);
  // Each switch is timed from its drain to the new layout admitting, as the engines answered.
  const std::string timed = "loom_gen_switch_seconds_count ";
  auto at = metrics.find(timed);
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, "missing " << timed);
  BOOST_CHECK_GE(std::stod(metrics.substr(at + timed.size())), 1.0);
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  auto events = events_in(s.dir / "db");
  BOOST_CHECK_EQUAL(count_prefix(events, "gen_reconfigured"), g["reconfigurations"].get<size_t>());
  BOOST_CHECK(std::any_of(events.begin(), events.end(), [&](auto& e) {
    return e.rfind("gen_reconfigured", 0) == 0
           && e.find("4xTP4 -> " + g["current"].get<std::string>()) != std::string::npos;
  }));
  BOOST_CHECK_EQUAL(count_prefix(events, "gen_step_done"), 1u);
}

BOOST_AUTO_TEST_CASE(a_straggler_is_relieved_by_migrating_its_requests) {
  // No planner: the batch is dealt round-robin over two TP8 instances, one per engine, and
  // every long request lands on instance 0, led by whichever engine registered first.
  lt::live_service s{{.fabric = false, .extra = deployment_text("TP8", false, true, 0.01)}};
  auto serve = s.serve();
  auto [a, b] = start_engines(s, two_lengths(64, 2, 300, 4000), "TP8");
  router r{s};
  r.start(0, 64);
  BOOST_REQUIRE_MESSAGE(r.done(0, 64), "the step did not end");
  auto g = generation_of(s);
  BOOST_TEST_MESSAGE("live straggler: " << g.dump());
  BOOST_CHECK_GT(g["migrations"].get<int>(), 0);
  // Running requests moved with their KV (transferred or recomputed, App. A).
  BOOST_CHECK_GT(g["kv_transfers"].get<int>() + g["kv_recomputes"].get<int>(), 0);
  BOOST_CHECK_EQUAL(g["reconfigurations"], 0);
  // The other engine admitted requests beyond its share of the batch: the migrated ones.
  auto straggler = std::find_if(g["instances"].begin(), g["instances"].end(),
                                [](auto& i) { return i["instance"] == 0; });
  BOOST_REQUIRE(straggler != g["instances"].end());
  auto relieving = (*straggler)["engines"][0] == "engine-a" ? b.get() : a.get();
  BOOST_CHECK_GE(count_prefix(relieving->stdout_lines(), "command"), 3u); // reshard, batch, more
  auto lines = relieving->stdout_lines();
  BOOST_CHECK_GE(std::count_if(lines.begin(), lines.end(),
                               [](auto& l) { return l.find("admit: ok") != std::string::npos; }),
                 2);
}

// OrchestrRL's cross-node configs run live: one TP16 instance over both engines (engine-b
// leads nothing and reports nothing, and is not taken for lost). A router numbering each
// step's requests from 0 runs step after step; an operator aborts a step that runs, the
// engines let its requests go, and the router hears why.
BOOST_AUTO_TEST_CASE(a_cross_node_instance_runs_steps_numbered_from_zero_and_one_is_aborted) {
  // Steps outlast an engine's grace (command_timeout_s x 3 = 2.25 s of silence), so a silent
  // engine-b would be lost in each.
  auto text = deployment_text("TP16", false, false);
  text.replace(text.find("command_timeout_s = 2"), 21, "command_timeout_s = 0.75");
  lt::live_service s{{.fabric = false, .extra = text}};
  auto serve = s.serve();
  auto scenario = scenario_file(s, 3, two_lengths(32, 4, 300, 8000));
  engine_pair p{start_engine(s, "engine-a", scenario, "TP16"),
                start_engine(s, "engine-b", scenario, "TP16")};
  await_layout(s, 1);
  router r{s, true};
  for (uint64_t step : {0, 1}) {
    auto t0 = std::chrono::steady_clock::now();
    r.start(step, 32);
    BOOST_REQUIRE_MESSAGE(r.done(step, 32), "step " << step << " did not end");
    BOOST_CHECK_GT(std::chrono::steady_clock::now() - t0, 2250ms);
  }
  BOOST_CHECK_EQUAL(generation_of(s)["engines_lost"], 0);
  r.start(2, 32);
  auto aborted = s.admin({"generation", "abort", "gen", "--reason", "bad batch"});
  BOOST_CHECK_MESSAGE(aborted.exit_code == 0, aborted.err);
  BOOST_CHECK_MESSAGE(aborted.out.find("gen: step 2 aborted") != std::string::npos, aborted.out);
  auto done = r.step_done(2);
  BOOST_REQUIRE(done);
  BOOST_CHECK(done->aborted());
  BOOST_CHECK_EQUAL(done->reason(), "aborted by an operator: bad batch");
  // Nothing runs now: a second abort is refused, and the next step is taken.
  BOOST_CHECK_EQUAL(s.admin({"generation", "abort", "gen"}).exit_code, 3);
  r.start(3, 32);
  BOOST_REQUIRE_MESSAGE(r.done(3, 32), "the step after the aborted one did not end");
  BOOST_CHECK_EQUAL(generation_of(s)["engines_lost"], 0);
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  auto events = events_in(s.dir / "db");
  BOOST_CHECK_EQUAL(count_prefix(events, "gen_step_aborted"), 1u);
  BOOST_CHECK_EQUAL(count_prefix(events, "gen_step_done"), 3u);
}

BOOST_AUTO_TEST_CASE(an_engine_killed_mid_step_leaves_the_deployment_running_on_the_rest) {
  lt::live_service s{{.fabric = false, .extra = deployment_text("TP4", true, true)}};
  auto serve = s.serve();
  auto [a, b] = start_engines(s, two_lengths(128, 4, 3000, 4000), "TP4");
  router r{s};
  r.start(0, 128);
  std::this_thread::sleep_for(1s);
  b->send_signal(SIGKILL);
  BOOST_REQUIRE(b->wait(lt::live_limit));
  BOOST_REQUIRE_MESSAGE(r.done(0, 128), "the step did not end without engine-b");
  auto g = generation_of(s);
  BOOST_TEST_MESSAGE("live engine loss: " << g.dump());
  BOOST_CHECK_EQUAL(g["engines_lost"], 1);
  BOOST_REQUIRE_EQUAL(g["engines"].size(), 1u);
  BOOST_CHECK(g["engines"][0].get<std::string>().rfind("engine-a", 0) == 0);
  for (auto& i : g["instances"])
    BOOST_CHECK(i["engines"] == json::array({"engine-a"}));
  BOOST_CHECK_EQUAL(g["finished"], 128);
  // Once its last engine is gone nothing serves, and `loom generation` says so (#40 item 11).
  a->send_signal(SIGKILL);
  BOOST_REQUIRE(a->wait(lt::live_limit));
  const auto deadline = std::chrono::steady_clock::now() + lt::live_limit;
  while (!generation_of(s)["engines"].empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  auto table = s.admin({"generation"});
  BOOST_CHECK_MESSAGE(table.out.find("  nothing") != std::string::npos
                        && table.out.find("engines: none registered") != std::string::npos,
                      table.out);
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  auto events = events_in(s.dir / "db");
  BOOST_CHECK_EQUAL(count_prefix(events, "gen_engine_lost"), 2u);
  BOOST_CHECK_EQUAL(count_prefix(events, "gen_step_done"), 1u);
}

BOOST_AUTO_TEST_CASE(an_engine_cannot_finish_another_engines_requests) {
  // #41 item 3: engine-b, hostile, acknowledges its commands but generates nothing, and reports
  // every request of the step finished at 8,192 tokens. Only its own count: the step ends when
  // the honest engine-a has finished its half.
  lt::live_service s{{.fabric = false, .extra = deployment_text("TP8", false, false)}};
  auto serve = s.serve();
  // Every response is 3,000 tokens: engine-a ends none of its own before the check below.
  auto honest = start_engine(s, "engine-a", scenario_file(s, 1, two_lengths(64, 1, 0, 3000)),
                             "TP8");
  client hostile{s.keys("engine-b")};
  std::mutex mutex;
  std::set<uint64_t> own; // admitted to its instance
  hostile.on_command([&](const v1::Envelope& e) {
    v1::CommandAck ack;
    ack.set_deployment("gen");
    ack.set_ok(true);
    if (e.has_reconfigure())
      ack.set_command(e.reconfigure().command());
    else if (e.has_admit_requests()) {
      ack.set_command(e.admit_requests().command());
      std::lock_guard<std::mutex> lock{mutex};
      for (auto& r : e.admit_requests().requests())
        own.insert(r.request());
    } else
      return;
    hostile.ack(ack);
  });
  BOOST_REQUIRE(hostile.register_engine("engine-b", "gen", 8, "engine-b")->has_registered());
  await_layout(s, 2);
  router r{s};
  r.start(0, 64);
  v1::RequestsFinished forged;
  forged.set_deployment("gen");
  forged.set_step(0);
  for (uint64_t i = 0; i < 64; ++i) {
    auto* d = forged.add_requests();
    d->set_request(i);
    d->set_output_tokens(8192);
  }
  std::promise<std::optional<call_error>> answer;
  hostile.requests_finished(forged, [&](std::optional<call_error> e) { answer.set_value(e); });
  BOOST_CHECK(!answer.get_future().get()); // its own requests counted
  size_t owned = 0;
  {
    std::lock_guard<std::mutex> lock{mutex};
    owned = own.size();
  }
  BOOST_CHECK_GT(owned, 0u);
  BOOST_CHECK_LT(owned, 64u);
  auto g = generation_of(s);
  BOOST_CHECK(g["step_active"].get<bool>());
  BOOST_CHECK_EQUAL(g["finished"].get<size_t>(), owned);
  BOOST_REQUIRE_MESSAGE(r.done(0, 64), "engine-a did not end the step");
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve->drain(5s);
  BOOST_CHECK(serve->stderr_text().find("event=gen_finish_refused deployment=gen engine=engine-b")
              != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_service_killed_mid_step_resumes_it_with_its_decisions) {
  lt::live_service s{{.fabric = false, .extra = deployment_text("TP4", true, true)}};
  auto serve = s.serve();
  auto [a, b] = start_engines(s, two_lengths(128, 8, 1500, 5000), "TP4");
  router r{s};
  r.start(0, 128);
  std::this_thread::sleep_for(1500ms);
  auto before = generation_of(s);
  serve->send_signal(SIGKILL);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  serve = s.serve();
  // What it decided is back as it was: layout, counts, the step and its finishes so far.
  auto after = generation_of(s);
  BOOST_TEST_MESSAGE("before the kill: " << before.dump() << "\nafter: " << after.dump());
  BOOST_CHECK_GE(after["layout"].get<int>(), before["layout"].get<int>());
  BOOST_CHECK_GE(after["reconfigurations"].get<int>(), before["reconfigurations"].get<int>());
  BOOST_CHECK_GE(after["finished"].get<int>(), before["finished"].get<int>());
  BOOST_CHECK_EQUAL(after["step"], 0);
  BOOST_REQUIRE_MESSAGE(r.done(0, 128), "the step did not end after the restart");
  auto g = generation_of(s);
  BOOST_CHECK_EQUAL(g["finished"], 128);
  BOOST_CHECK_EQUAL(g["engines_lost"], 0); // both engines registered again
  BOOST_CHECK_EQUAL(g["engines"].size(), 2u);
  for (auto& e : g["engines"])
    BOOST_CHECK(e.get<std::string>().find("away") == std::string::npos);
  BOOST_CHECK_EQUAL(count_prefix(a->stderr_lines(), "register failed"), 0u);
  // A router that was away when the step ended hears its StepDone once it registers.
  router late{s, false, "router-late"};
  auto heard = late.step_done(0);
  BOOST_REQUIRE_MESSAGE(heard, "no StepDone for a router registering after the step");
  BOOST_CHECK_EQUAL(heard->requests(), 128u);
}

BOOST_AUTO_TEST_CASE(a_python_engine_serves_a_step) {
  lt::live_service s{{.fabric = false, .extra = deployment_text("TP8", false, false)}};
  auto serve = s.serve();
  auto py = s.python_example("gen_engine.py", "engine-a",
                             {"--deployment", "gen", "--engine-id", "engine-a", "--gpus", "8",
                              "--tokens", "64", "--tokens-per-s", "400"});
  for (int i = 0; i < 400 && generation_of(s)["instances"].empty(); ++i)
    std::this_thread::sleep_for(50ms);
  router r{s};
  auto placed = r.start(0, 16);
  for (auto& p : placed.placements())
    BOOST_CHECK_EQUAL(p.engine(), "engine-a");
  BOOST_REQUIRE_MESSAGE(r.done(0, 16), "the step did not end:\n" << py->stderr_text());
  auto lines = py->stdout_lines();
  BOOST_CHECK(std::any_of(lines.begin(), lines.end(), [](auto& l) {
    return l.find("admit_requests: ok") != std::string::npos;
  }));
  BOOST_CHECK_GE(count_prefix(lines, "finished"), 1u);
  BOOST_CHECK_EQUAL(generation_of(s)["finished"], 16);
}

namespace {

/// The reconfigurations a store's event log holds, as "step=N FROM -> TO".
std::vector<std::string> reconfigurations_in(const std::string& db_dir) {
  std::vector<std::string> out;
  for (auto& e : events_in(db_dir))
    if (e.rfind("gen_reconfigured", 0) == 0) {
      auto step = e.substr(e.find("step="), e.find(' ', e.find("step=")) - e.find("step="));
      out.push_back(step + " " + e.substr(e.rfind(' ', e.find(" -> ") - 1) + 1));
    }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(loom_drive_plays_a_generation_scenario_live_as_replay_decides_it) {
  lt::live_service s{{.fabric = false}};
  auto scenario = lt::source_path("replay/scenarios/gen-drive.toml");
  auto replayed = lt::run({lt::loom_binary(), "replay", scenario, "--out", s.dir / "replay"},
                          120s);
  BOOST_REQUIRE_MESSAGE(replayed.exit_code == 0, replayed.err);
  auto endpoint = "tcp://127.0.0.1:" + std::to_string(lt::free_tcp_port());
  const std::string scale = "20";
  auto written = lt::run({lt::loom_binary(), "drive", scenario, "--serve-config",
                          s.dir / "drive.toml", "--storage", s.dir / "drive-db", "--endpoint",
                          endpoint, "--key", s.dir / "keys/router", "--engine-key",
                          s.dir / "keys/engine-a", "--time-scale", scale, "--out",
                          s.dir / "sweep"});
  BOOST_REQUIRE_MESSAGE(written.exit_code == 0, written.err);
  auto serve = std::make_unique<lt::child_process>(std::vector<std::string>{
    lt::loom_binary(), "serve", "-c", s.dir / "drive.toml", "--log-level", "warn"});
  for (int i = 0; i < 600 && lt::read_file(s.dir / "drive-db/keys/admin.pub").empty(); ++i)
    std::this_thread::sleep_for(100ms);
  auto driven = lt::run({lt::loom_binary(), "drive", scenario, "--endpoint", endpoint,
                         "--server-key", s.dir / "drive-db/keys/server.pub", "--key",
                         s.dir / "keys/router", "--engine-key", s.dir / "keys/engine-a",
                         "--engine-binary", std::getenv("LOOM_EXAMPLE_ENGINE"), "--time-scale",
                         scale, "--out", s.dir / "drive"},
                        300s);
  BOOST_REQUIRE_MESSAGE(driven.exit_code == 0, driven.out << driven.err);
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(lt::live_limit));
  auto replay = json::parse(lt::read_file(s.dir / "replay/report.json"))["policies"]["orchestr"];
  auto live_report = json::parse(lt::read_file(s.dir / "drive/report.json"));
  auto live = live_report["policies"]["orchestr"];
  BOOST_TEST_MESSAGE("drive " << live_report["drive"].dump() << "\nlive " << live.dump()
                              << "\nreplay " << replay.dump());
  BOOST_CHECK(live_report["drive"]["engine_exit_codes"] == json::array({0, 0}));
  // The same deployment to start from; throughput within 5% (timing jitter of the engines'
  // ticks and of the messages, at 20x); the same reconfigurations at the same steps.
  BOOST_CHECK_EQUAL(live["initial_deployment"], replay["initial_deployment"]);
  const double live_sps = live["samples_per_s"].get<double>();
  const double replay_sps = replay["samples_per_s"].get<double>();
  BOOST_CHECK_LE(std::abs(live_sps - replay_sps) / replay_sps, 0.05);
  BOOST_CHECK_EQUAL(live["reconfigurations"], replay["reconfigurations"]);
  auto replayed_switches = reconfigurations_in(s.dir / "replay/store/orchestr");
  BOOST_CHECK_EQUAL(replayed_switches.size(), replay["reconfigurations"].get<size_t>());
  BOOST_CHECK(reconfigurations_in(s.dir / "drive-db") == replayed_switches);
  // The balancer runs live too, on every tick's loads, and those are the machine's: a busy
  // machine delays one engine's ticks. It moves a request only where a pace gap outlasts how
  // far the rates swing (replay: none), so the count follows the machine, and is never a
  // runaway: fewer moves than requests.
  const double live_moves = live["migrations"].get<double>();
  const auto workload = json::parse(lt::read_file(s.dir / "replay/report.json"))["workload"];
  BOOST_TEST_MESSAGE("live moves " << live_moves << ", replayed " << replay["migrations"]);
  BOOST_CHECK_LT(live_moves, workload["steps"].get<double>() * workload["batch"].get<double>());
}
