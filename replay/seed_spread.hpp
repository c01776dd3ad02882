#pragma once
// A scenario replayed under several seeds: each metric's mean, min and max over the seeds'
// reports, so that a figure is judged on its spread rather than on one lucky draw.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::replay {

using ordered_json = nlohmann::ordered_json;

/// {"mean", "min", "max"} of the values, rounded as reports round.
ordered_json spread_of(const std::vector<double>& values);

/// Every numeric leaf the reports share, by JSON pointer path below `section` (e.g.
/// "/policies"), as {"mean", "min", "max"}; objects nest as in the reports. Leaves only some
/// reports have, or that are not numbers (figures, job lists), are left out.
ordered_json spread_across(const std::vector<ordered_json>& reports, const std::string& section,
                           const std::vector<std::string>& skip = {});

/// The means of a spread_across() result, in the same shape: what a one-seed report would say.
ordered_json means_of(const ordered_json& spread);

} // namespace loom::replay
