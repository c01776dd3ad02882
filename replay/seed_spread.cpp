#include "replay/seed_spread.hpp"

#include <algorithm>
#include <numeric>

#include "replay/report.hpp"

namespace loom::replay {

ordered_json spread_of(const std::vector<double>& values) {
  if (values.empty())
    return nullptr;
  const double sum = std::accumulate(values.begin(), values.end(), 0.0);
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return {{"mean", round4(sum / double(values.size()))}, {"min", round4(*lo)}, {"max", round4(*hi)}};
}

namespace {

bool is_spread(const ordered_json& v) {
  return v.is_object() && v.size() == 3 && v.contains("mean") && v.contains("min")
         && v.contains("max");
}

/// The spread of the leaf or object at `path` in every report; null if some report lacks it.
ordered_json spread_at(const std::vector<ordered_json>& reports, const ordered_json::json_pointer& path,
                       const std::vector<std::string>& skip) {
  const auto& first = reports.front().at(path);
  if (first.is_number()) {
    std::vector<double> values;
    for (auto& r : reports) {
      if (!r.contains(path) || !r.at(path).is_number())
        return nullptr;
      values.push_back(r.at(path).get<double>());
    }
    return spread_of(values);
  }
  if (!first.is_object())
    return nullptr;
  ordered_json out = ordered_json::object();
  for (auto& [key, v] : first.items()) {
    if (std::find(skip.begin(), skip.end(), key) != skip.end())
      continue;
    if (auto s = spread_at(reports, path / key, skip); !s.is_null() && !s.empty())
      out[key] = std::move(s);
  }
  return out;
}

} // namespace

ordered_json spread_across(const std::vector<ordered_json>& reports, const std::string& section,
                           const std::vector<std::string>& skip) {
  const ordered_json::json_pointer path{section};
  if (reports.empty() || !reports.front().contains(path))
    return ordered_json::object();
  return spread_at(reports, path, skip);
}

ordered_json means_of(const ordered_json& spread) {
  if (is_spread(spread))
    return spread["mean"];
  ordered_json out = ordered_json::object();
  for (auto& [key, v] : spread.items())
    out[key] = means_of(v);
  return out;
}

} // namespace loom::replay
