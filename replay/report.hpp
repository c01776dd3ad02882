#pragma once
// What every replay report shares: figures rounded so that report.json is stable text,
// percentiles, and writing report.json and timings.json into the output directory.

#include <string>
#include <vector>

#include <caf/error.hpp>

namespace loom::replay {

/// Rounded to 4 decimals: reports compare as text across builds.
double round4(double x);

/// The q-quantile (nearest rank); 0 for no values.
double percentile(std::vector<double> values, double q);

/// Creates `dir`; an error names it.
caf::error make_output_dir(const std::string& dir);

/// Writes DIR/report.json and DIR/timings.json.
caf::error write_report_files(const std::string& dir, const std::string& report_json,
                              const std::string& timings_json);

} // namespace loom::replay
