#pragma once
// What every replay's output shares: figures rounded so that report.json is stable text,
// percentiles, writing report.json, timings.json and report.html, and each policy's scratch
// store.

#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "store/database.hpp"

namespace loom::replay {

/// Rounded to 4 decimals: reports compare as text across builds.
double round4(double x);

/// The q-quantile (nearest rank); 0 for no values.
double percentile(std::vector<double> values, double q);

/// Creates `dir`; an error names it.
caf::error make_output_dir(const std::string& dir);

/// Where a multi-seed replay writes seed `seed`'s full report, relative to its DIR.
std::string seed_report_dir(uint64_t seed);

/// DIR/seed-N, created; an error names it.
caf::expected<std::string> make_seed_dir(const std::string& out_dir, uint64_t seed);

/// A replay into DIR, created first: `many` for a scenario of several seeds, else `one`.
template <class Scenario, class Run>
auto replay_by_seeds(const Scenario& sc, const std::string& out_dir, Run one, Run many)
  -> decltype(one(sc, out_dir)) {
  if (auto err = make_output_dir(out_dir))
    return err;
  return sc.seeds.size() > 1 ? many(sc, out_dir) : one(sc, out_dir);
}

/// A policy's RocksDB store (DIR/store/POLICY), emptied of any earlier run first.
caf::expected<std::unique_ptr<database>> open_scratch_store(const std::string& dir);

/// Writes `text` to `path`; an error names it.
caf::error write_text_file(const std::string& path, const std::string& text);

/// Writes DIR/report.json, DIR/timings.json and DIR/report.html (drawn from report.json).
caf::error write_report_files(const std::string& dir, const std::string& report_json,
                              const std::string& timings_json);

} // namespace loom::replay
