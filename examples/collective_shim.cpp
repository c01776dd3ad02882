// A collective shim on libloomclient (Opus §4.1, role collective-shim): the layer under a
// training framework's collectives that asks Loom for the rail topology each operation needs
// before it runs. It registers the job on its photonic rails (OpusJob), then runs training
// steps of a PP x FSDP job, one thread per pipeline stage: before each PP Send/Recv and each
// FSDP all-gather / reduce-scatter the stage writes its topo_write and waits for the TopoAck
// (the barrier: both ends of a Send/Recv write the same operation). Downstream stages start
// their first all-gather only once the previous stage's activation arrives (the lazy
// all-gather the paper's schedule has). The "compute" is a sleep. Run with --help.

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/example_support.hpp"
#include "loom/client.hpp"

namespace {

struct settings {
  loom::client_options client;
  std::string server_key, key, id = "shim-0", job = "opus-job", initial;
  std::vector<std::string> rails;
  uint32_t pp = 2, dp = 2;
  int steps = 1, compute_ms = 20;
};

using loom::example::say;

/// One stage's writes, numbered per group so both ends of a Send/Recv name the same operation.
class stage_shim {
public:
  stage_shim(loom::client& c, const settings& s, uint32_t stage) : c_(c), s_(s), stage_(stage) {}

  /// Forward then backward of one step; false if a write failed.
  bool step() {
    const bool first = stage_ == 0, last = stage_ + 1 == s_.pp;
    auto pp_down = "pp" + std::to_string(stage_) + "-" + std::to_string(stage_ + 1);
    auto pp_up = "pp" + std::to_string(int(stage_) - 1) + "-" + std::to_string(stage_);
    auto dp = "dp" + std::to_string(stage_);
    return (first || write(pp_up, 2, 0))     // receive the activation
           && write(dp, 1, 1) && compute()   // FSDP all-gather, forward
           && (last || write(pp_down, 2, 0)) // send the activation
           && (last || write(pp_down, 2, 0)) // receive the gradient
           && write(dp, 1, 1) && compute()   // all-gather, backward
           && (first || write(pp_up, 2, 0))  // send the gradient
           && write(dp, 1, 1);               // reduce-scatter of the gradients
  }

  int writes() const { return writes_; }

private:
  bool write(const std::string& group, uint32_t group_size, uint32_t digit) {
    loom::v1::Envelope e;
    auto* w = e.mutable_topo_write();
    w->set_job(s_.job);
    w->set_group(group);
    w->set_op_index(ops_[group]++);
    w->set_group_size(group_size);
    w->set_stage(stage_);
    w->set_digit(digit);
    auto ack = c_.call(e, loom::no_timeout);
    ++writes_;
    if (!ack || !ack->has_topo_ack()) {
      std::fprintf(stderr, "stage %u topo_write %s failed: %s\n", stage_, group.c_str(),
                   ack && ack->has_error() ? ack->error().message().c_str() : "no answer");
      return false;
    }
    say("stage %u %s op %llu topo %s%s", stage_, group.c_str(),
        static_cast<unsigned long long>(w->op_index()), ack->topo_ack().topo().c_str(),
        ack->topo_ack().fallback() ? " (giant ring)" : "");
    return true;
  }

  bool compute() {
    std::this_thread::sleep_for(std::chrono::milliseconds{s_.compute_ms});
    return true;
  }

  loom::client& c_;
  const settings& s_;
  uint32_t stage_;
  std::map<std::string, uint64_t> ops_;
  int writes_ = 0;
};

int run(const settings& s) {
  loom::client c{s.client};
  auto reg = c.register_worker("collective-shim", s.id, "");
  if (!reg || !reg->has_registered()) {
    std::fprintf(stderr, "register failed: %s\n",
                 reg && reg->has_error() ? reg->error().message().c_str() : "no answer");
    return 1;
  }
  loom::v1::Envelope job;
  auto* j = job.mutable_opus_job();
  j->set_job(s.job);
  j->set_pp(s.pp);
  j->add_symmetrical(s.dp);
  for (auto& r : s.rails)
    j->add_rails(r);
  j->set_initial(s.initial.empty() ? std::string(s.pp, '1') : s.initial);
  auto ok = c.call(job);
  if (!ok || !ok->has_ok()) {
    std::fprintf(stderr, "OpusJob refused: %s\n",
                 ok && ok->has_error() ? ok->error().message().c_str() : "no answer");
    return 1;
  }
  say("job %s on %zu rails, topo %s", s.job.c_str(), s.rails.size(), j->initial().c_str());
  std::vector<stage_shim> stages;
  for (uint32_t p = 0; p < s.pp; ++p)
    stages.emplace_back(c, s, p);
  for (int step = 0; step < s.steps; ++step) {
    std::vector<int> failed(s.pp, 0);
    std::vector<std::thread> threads;
    for (uint32_t p = 0; p < s.pp; ++p)
      threads.emplace_back([&, p] { failed[p] = !stages[p].step(); });
    for (auto& t : threads)
      t.join();
    for (auto f : failed)
      if (f)
        return 1;
    int writes = 0;
    for (auto& st : stages)
      writes += st.writes();
    say("step %d done: %d topo_writes so far", step, writes);
  }
  c.goodbye("done", false);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  settings s;
  CLI::App app{"A collective shim (Opus §4.1): registers a PP x FSDP job on photonic rails and "
               "runs training steps whose collectives each wait for their topology."};
  loom::example::add_connection_options(app, s.client, s.server_key, s.key, "This shim's");
  app.add_option("--id", s.id, "Worker id")->capture_default_str();
  app.add_option("--job", s.job, "Job name")->capture_default_str();
  app.add_option("--rails", s.rails, "The job's rail OCS device ids")->required();
  app.add_option("--pp", s.pp, "Pipeline stages")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--dp", s.dp, "FSDP degree")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--initial", s.initial, "Starting topo_id (one digit per stage; default all 1)");
  app.add_option("--steps", s.steps, "Training steps")->check(CLI::PositiveNumber)
    ->capture_default_str();
  app.add_option("--compute-ms", s.compute_ms, "Each forward and backward")
    ->check(CLI::NonNegativeNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  loom::example::load_keys(s.client, s.server_key, s.key);
  return run(s);
}
