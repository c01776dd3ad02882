#include "replay/gen_workload.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace loom::replay {

std::vector<std::vector<gen_sample>> generate_gen_workload(const gen_length_generator& g,
                                                           uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_int_distribution<int64_t> prompt{g.prompt_min, g.prompt_max};
  std::normal_distribution<double> z{0.0, 1.0};
  const double rho = g.group_size > 1 ? g.group_correlation : 0.0; // no group, nothing shared
  const double shared = g.sigma * std::sqrt(rho);
  const double own = g.sigma * std::sqrt(1 - rho);
  std::vector<std::vector<gen_sample>> steps(size_t(g.steps));
  for (int s = 0; s < g.steps; ++s) {
    const double median = g.median_tokens * std::pow(1 + g.drift_per_step, s);
    for (int i = 0; i < g.batch; i += g.group_size) {
      // Drawn in a fixed order (prompt, the group's share, then each output) so a seed names
      // one workload; groups of one draw no share, as before groups existed.
      const int64_t p = prompt(rng);
      const double group = g.group_size > 1 ? shared * z(rng) : 0.0;
      for (int k = 0; k < g.group_size && i + k < g.batch; ++k) {
        const double out = median * std::exp(group + own * z(rng));
        steps[size_t(s)].push_back({p, std::clamp<int64_t>(std::llround(out), 1, g.max_tokens)});
      }
    }
  }
  return steps;
}

std::optional<std::vector<std::vector<gen_sample>>>
load_gen_trace(const gen_trace_options& o, std::vector<config_error>& errors) {
  std::ifstream in{o.path};
  if (!in) {
    errors.push_back(config_error{o.path, 0, 0, "", "cannot open file"});
    return std::nullopt;
  }
  std::vector<gen_sample> rows;
  std::string line;
  const size_t before = errors.size();
  for (int number = 1; std::getline(in, line); ++number) {
    if (number == 1 && line.rfind("TIMESTAMP", 0) == 0)
      continue; // the header
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    std::stringstream fields{line};
    std::string stamp, context, generated;
    std::getline(fields, stamp, ',');
    std::getline(fields, context, ',');
    std::getline(fields, generated, ',');
    auto number_of = [](std::string text, int64_t& out) {
      while (!text.empty() && (text.back() == '\r' || text.back() == ' '))
        text.pop_back();
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
      return ec == std::errc{} && end == text.data() + text.size() && out > 0;
    };
    int64_t c = 0;
    int64_t g = 0;
    if (!number_of(context, c) || !number_of(generated, g)) {
      errors.push_back(config_error{o.path, number, 0, "",
                                    "expected TIMESTAMP,ContextTokens,GeneratedTokens with "
                                    "positive token counts"});
      continue;
    }
    rows.push_back({std::max<int64_t>(1, std::llround(double(c) * o.prompt_scale)),
                    std::clamp<int64_t>(std::llround(double(g) * o.output_scale), 1,
                                        o.max_tokens)});
  }
  if (errors.size() > before)
    return std::nullopt;
  if (rows.empty()) {
    errors.push_back(config_error{o.path, 0, 0, "", "the trace has no requests"});
    return std::nullopt;
  }
  std::vector<std::vector<gen_sample>> steps(size_t(o.steps));
  size_t next = 0;
  for (auto& step : steps)
    for (int i = 0; i < o.batch; ++i)
      step.push_back(rows[next++ % rows.size()]);
  return steps;
}

} // namespace loom::replay
