// A collective shim on libloomclient (Opus §4.1-4.2, role collective-shim): the layer under a
// training framework's collectives that asks Loom for the rail topology each one needs. It
// registers a PP x FSDP job on its photonic rails (OpusJob), then runs training steps, one
// thread per pipeline stage, each stage's collectives going through loom::opus_stage_shim:
// PP Send/Recv (both ends write the same operation) and FSDP all-gathers and reduce-scatters.
// Downstream stages start their first all-gather only once the activation arrived (the lazy
// all-gather of the paper's schedule). The first --profile-steps steps write before every
// collective; then the stages' traces go to Loom, which answers the phase table, and the
// shims write only where phases change, provisioning the next phase early in provisioning
// mode. With --end the job ends after its steps: its circuits leave the rails and its ports
// are free for another job (Opus §7). The "compute" is a sleep. Run with --help.

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/example_support.hpp"
#include "loom/client.hpp"
#include "loom/opus_shim.hpp"

namespace {

struct settings {
  loom::client_options client;
  std::string server_key, key, id = "shim-0", job = "opus-job", initial, mode = "provisioning";
  std::vector<std::string> rails;
  uint32_t pp = 2, dp = 2;
  int steps = 1, profile_steps = 1, compute_ms = 20;
  uint32_t first_port = 0; // 0: Loom picks the job's ports
  bool end = false;
};

using loom::example::say;
using loom::opus_op;

/// One stage's training step over its shim; false if a collective's write failed.
class stage_runner {
public:
  stage_runner(loom::client& c, const settings& s, uint32_t stage, const std::string& topo)
      : s_(s), stage_(stage),
        shim_(c, s.job, stage,
              s.mode == "on-demand" ? loom::opus_shim_mode::on_demand
                                    : loom::opus_shim_mode::provisioning,
              topo) {}

  /// Forward then backward of one step.
  bool step() {
    const bool first = stage_ == 0, last = stage_ + 1 == s_.pp;
    auto name = [](uint32_t a) { return "pp" + std::to_string(a) + "-" + std::to_string(a + 1); };
    const opus_op up{first ? "" : name(stage_ - 1), 2, 0}, down{name(stage_), 2, 0};
    const opus_op dp{"dp" + std::to_string(stage_), 1, 1};
    return (first || comm(up))              // receive the activation
           && comm(dp) && compute()         // FSDP all-gather, forward
           && (last || comm(down))          // send the activation
           && (last || comm(down))          // receive the gradient
           && comm(dp) && compute()         // all-gather, backward
           && (first || comm(up))           // send the gradient
           && comm(dp);                     // reduce-scatter of the gradients
  }

  loom::opus_stage_shim& shim() { return shim_; }

private:
  bool comm(const opus_op& op) {
    if (!shim_.pre_comm(op)) {
      std::fprintf(stderr, "stage %u topo_write %s failed: %s\n", stage_, op.group.c_str(),
                   shim_.error().message.c_str());
      return false;
    }
    say("stage %u %s topo %s", stage_, op.group.c_str(), shim_.topo().c_str());
    shim_.post_comm(); // the collective itself takes no time here
    return true;
  }

  bool compute() {
    std::this_thread::sleep_for(std::chrono::milliseconds{s_.compute_ms});
    return true;
  }

  const settings& s_;
  uint32_t stage_;
  loom::opus_stage_shim shim_;
};

std::optional<loom::v1::OpusRegistered> register_job(loom::client& c, const settings& s,
                                                      const std::vector<loom::v1::OpusStageTrace>& traces) {
  loom::v1::Envelope job;
  auto* j = job.mutable_opus_job();
  j->set_job(s.job);
  j->set_pp(s.pp);
  j->add_symmetrical(s.dp);
  for (auto& r : s.rails)
    j->add_rails(r);
  j->set_initial(s.initial.empty() ? std::string(s.pp, '1') : s.initial);
  j->set_first_port(s.first_port);
  for (auto& t : traces)
    *j->add_traces() = t;
  auto r = c.call(job);
  if (!r || !r->has_opus_registered()) {
    std::fprintf(stderr, "OpusJob refused: %s\n",
                 r && r->has_error() ? r->error().message().c_str() : "no answer");
    return std::nullopt;
  }
  return r->opus_registered();
}

/// Opus §4.2: the profiled step's traces to Loom, and the phase table it learned to each stage.
bool learn_phases(loom::client& c, const settings& s,
                  std::vector<std::unique_ptr<stage_runner>>& stages) {
  std::vector<loom::v1::OpusStageTrace> traces;
  for (auto& st : stages)
    traces.push_back(st->shim().trace());
  auto learned = register_job(c, s, traces);
  if (!learned)
    return false;
  for (uint32_t p = 0; p < s.pp; ++p)
    if (!stages[p]->shim().set_table(loom::phase_table(*learned, p)))
      std::fprintf(stderr, "stage %u: the phase table does not match its schedule\n", p);
  say("phase table learned: %d phases over %u stages", learned->phases_size(), s.pp);
  return true;
}

int run(const settings& s) {
  loom::client c{s.client};
  auto reg = c.register_worker("collective-shim", s.id, s.job);
  if (!reg || !reg->has_registered()) {
    std::fprintf(stderr, "register failed: %s\n",
                 reg && reg->has_error() ? reg->error().message().c_str() : "no answer");
    return 1;
  }
  auto job = register_job(c, s, {});
  if (!job)
    return 1;
  say("job %s on %zu rails, topo %s, ports %u-%u", s.job.c_str(), s.rails.size(),
      job->topo().c_str(), job->first_port(), job->first_port() + s.pp * s.dp - 1);
  std::vector<std::unique_ptr<stage_runner>> stages;
  for (uint32_t p = 0; p < s.pp; ++p)
    stages.push_back(std::make_unique<stage_runner>(c, s, p, job->topo()));
  for (int step = 0; step < s.steps; ++step) {
    std::vector<int> failed(s.pp, 0);
    std::vector<std::thread> threads;
    for (uint32_t p = 0; p < s.pp; ++p)
      threads.emplace_back([&, p] {
        auto& shim = stages[p]->shim();
        if (step + 1 == s.steps)
          shim.last_step();
        failed[p] = !stages[p]->step();
        shim.end_step();
      });
    for (auto& t : threads)
      t.join();
    for (auto f : failed)
      if (f)
        return 1;
    int writes = 0;
    for (auto& st : stages)
      writes += st->shim().writes();
    say("step %d done: %d topo_writes so far", step, writes);
    if (step + 1 == s.profile_steps && !learn_phases(c, s, stages))
      return 1;
  }
  stages.clear(); // each waits for its last provisioning write
  if (s.end) {
    loom::v1::Envelope end;
    end.mutable_opus_job_end()->set_job(s.job);
    auto r = c.call(end);
    if (!r || !r->has_ok()) {
      std::fprintf(stderr, "OpusJobEnd refused: %s\n",
                   r && r->has_error() ? r->error().message().c_str() : "no answer");
      return 1;
    }
    say("job %s ended: its ports are free", s.job.c_str());
  }
  c.goodbye("done", false);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"A collective shim (Opus §4.1-4.2): registers a PP x FSDP job on photonic rails "
               "and runs training steps whose collectives each wait for their topology."};
  loom::example::add_connection_options(app, s.client, s.server_key, s.key, "This shim's");
  app.add_option("--id", s.id, "Worker id")->capture_default_str();
  app.add_option("--job", s.job, "Job name")->capture_default_str();
  app.add_option("--rails", s.rails, "The job's rail OCS device ids")->required();
  app.add_option("--pp", s.pp, "Pipeline stages")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--dp", s.dp, "FSDP degree")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--initial", s.initial, "Starting topo_id (one digit per stage; default all 1)");
  app.add_option("--steps", s.steps, "Training steps")->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--profile-steps", s.profile_steps,
                 "Steps that write before every collective; then the phase table rules")
    ->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--mode", s.mode, "on-demand, or provisioning (Opus §4.2 O2)")
    ->check(CLI::IsMember({"on-demand", "provisioning"}))->capture_default_str();
  app.add_option("--first-port", s.first_port,
                 "Rank 0's port on every rail (0: Loom picks the lowest free range)")
    ->capture_default_str();
  app.add_flag("--end", s.end, "End the job after its steps: its rails' ports are freed");
  app.add_option("--compute-ms", s.compute_ms, "Each forward and backward")
    ->check(CLI::NonNegativeNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!loom::example::load_keys(s.client, s.server_key, s.key))
    return 2;
  return run(s);
}
