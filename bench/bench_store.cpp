// RocksDB store: cost of an acknowledged (fsync'd) decision vs. an unsynced write, of a large
// atomic batch, and of a point read.

#include <benchmark/benchmark.h>

#include <filesystem>
#include <random>

#include "loom.pb.h"
#include "store/database.hpp"

namespace {

struct bench_db {
  std::filesystem::path dir;
  std::unique_ptr<loom::database> db;

  bench_db() {
    dir = std::filesystem::temp_directory_path()
          / ("loom-bench-" + std::to_string(std::random_device{}()));
    auto opened = loom::database::open(dir.string());
    if (!opened)
      throw std::runtime_error("cannot open benchmark database");
    db = std::move(*opened);
  }
  ~bench_db() {
    db.reset();
    std::filesystem::remove_all(dir);
  }
};

std::string job_value(uint64_t i) {
  loom::v1::Job job;
  job.set_id("job-" + std::to_string(i));
  job.set_model("Qwen2.5-32B");
  job.set_rollout_gpus(32);
  job.set_training_gpus(16);
  job.set_worst_rollout_s(512);
  job.set_worst_training_s(240);
  job.set_state(loom::v1::JOB_STATE_PLACED);
  return job.SerializeAsString();
}

void write_jobs(benchmark::State& state, bool sync, int per_batch) {
  bench_db b;
  uint64_t i = 0;
  for (auto _ : state) {
    loom::write_batch batch;
    batch.sync = sync;
    for (int k = 0; k < per_batch; ++k, ++i) {
      batch.records.push_back({loom::record_kind::jobs, "job-" + std::to_string(i), job_value(i),
                               false});
      batch.events.push_back("job_placed");
    }
    if (!b.db->write(batch))
      state.SkipWithError("write failed");
  }
  state.SetItemsProcessed(static_cast<int64_t>(i));
}

void BM_write_synced(benchmark::State& state) {
  write_jobs(state, true, static_cast<int>(state.range(0)));
}
BENCHMARK(BM_write_synced)->Arg(1)->Arg(64)->UseRealTime();

void BM_write_unsynced(benchmark::State& state) {
  write_jobs(state, false, static_cast<int>(state.range(0)));
}
BENCHMARK(BM_write_unsynced)->Arg(1)->Arg(64)->UseRealTime();

void BM_get(benchmark::State& state) {
  bench_db b;
  constexpr uint64_t n = 10000;
  loom::write_batch batch;
  batch.sync = false;
  for (uint64_t i = 0; i < n; ++i)
    batch.records.push_back({loom::record_kind::jobs, "job-" + std::to_string(i), job_value(i),
                             false});
  b.db->write(batch);
  std::mt19937_64 rng{1};
  for (auto _ : state) {
    auto v = b.db->get(loom::record_kind::jobs, "job-" + std::to_string(rng() % n));
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_get);

} // namespace

BENCHMARK_MAIN();
