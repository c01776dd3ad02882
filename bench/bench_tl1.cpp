// TL1 path overhead on loopback: a `loom ocs-emu` child process with switching delay 0, driven
// by the TL1 client. Each add is one ENT-PATCH (pipelined), each remove batch one DLT-PATCH.

#include <benchmark/benchmark.h>

#include <csignal>
#include <cstdlib>

#include "drivers/tl1_client.hpp"
#include "tests/support/process.hpp"

namespace {

using namespace std::chrono_literals;

uint16_t start_emulator(std::unique_ptr<loom::test::child_process>& proc) {
  std::string bin = std::getenv("LOOM_BIN") ? std::getenv("LOOM_BIN") : LOOM_BUILD_ROOT "/loom";
  proc = std::make_unique<loom::test::child_process>(std::vector<std::string>{
    bin, "ocs-emu", "--port", "0", "--size", "512x512", "--delay-ms", "0"});
  auto line = proc->read_until(
    true, [](const std::string& l) { return l.find("event=ocs_emu_listening") != l.npos; }, 30s);
  if (!line)
    throw std::runtime_error("ocs-emu did not start");
  return static_cast<uint16_t>(std::stoi(line->substr(line->find("port=") + 5)));
}

void BM_tl1_apply(benchmark::State& state) {
  std::unique_ptr<loom::test::child_process> proc;
  auto port = start_emulator(proc);
  loom::tl1_client client{{"127.0.0.1", port, "admin", "root"}, {}};
  const auto pairs = static_cast<uint32_t>(state.range(0));
  loom::xc_diff add;
  loom::xc_diff remove;
  for (uint32_t i = 1; i <= pairs; ++i)
    add.adds.push_back({i, 512 + i});
  remove.removes = add.adds;
  if (!client.list()) {
    state.SkipWithError("cannot reach ocs-emu");
    return;
  }
  const bool removing = state.range(1) == 1;
  for (auto _ : state) {
    if (removing) {
      state.PauseTiming();
      client.apply(add);
      state.ResumeTiming();
      if (!client.apply(remove))
        state.SkipWithError("remove failed");
    } else {
      if (!client.apply(add))
        state.SkipWithError("add failed");
      state.PauseTiming();
      client.apply(remove);
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * pairs);
  state.SetLabel(removing ? "remove (one DLT-PATCH)" : "add (pipelined ENT-PATCH)");
  proc->send_signal(SIGTERM);
  proc->wait(10s);
}
BENCHMARK(BM_tl1_apply)
  ->ArgsProduct({{1, 16, 256}, {0, 1}})
  ->ArgNames({"pairs", "remove"})
  ->Unit(benchmark::kMicrosecond)
  ->UseRealTime();

} // namespace

BENCHMARK_MAIN();
