#include "generation/histogram.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loom {

remaining_histogram::remaining_histogram(int bin_tokens, int64_t max_tokens)
  : bin_(bin_tokens),
    max_(max_tokens),
    counts_(static_cast<size_t>((max_tokens + bin_tokens - 1) / bin_tokens), 0.0) {}

void remaining_histogram::assign(const std::vector<double>& counts) {
  std::fill(counts_.begin(), counts_.end(), 0.0);
  for (size_t i = 0; i < counts_.size() && i < counts.size(); ++i)
    counts_[i] = std::max(0.0, counts[i]);
}

int64_t remaining_histogram::upper_bound(size_t bin) const {
  return std::min<int64_t>(static_cast<int64_t>(bin + 1) * bin_, max_);
}

size_t remaining_histogram::bin_of(int64_t tokens) const {
  auto b = tokens <= 0 ? 0 : static_cast<size_t>((tokens - 1) / bin_);
  return std::min(b, counts_.size() - 1);
}

double remaining_histogram::pending() const {
  return std::accumulate(counts_.begin(), counts_.end(), 0.0);
}

void remaining_histogram::on_finished(int64_t output_tokens) {
  double need = 1.0;
  for (auto b = bin_of(output_tokens); b < counts_.size() && need > 0; ++b) {
    double take = std::min(need, counts_[b]);
    counts_[b] -= take;
    need -= take;
  }
}

void remaining_histogram::on_progress(int64_t min_generated) {
  double moved = 0;
  size_t b = 0;
  for (; b < counts_.size() && upper_bound(b) <= min_generated; ++b) {
    moved += counts_[b];
    counts_[b] = 0;
  }
  if (b < counts_.size())
    counts_[b] += moved;
}

std::vector<int64_t>
remaining_histogram::estimate_remaining(const std::vector<int64_t>& generated) const {
  // Expand the histogram into per-request lengths, longest first (rounded to whole requests).
  std::vector<int64_t> lengths;
  for (size_t b = counts_.size(); b-- > 0;)
    for (long k = 0; k < std::lround(counts_[b]); ++k)
      lengths.push_back(upper_bound(b));
  std::vector<size_t> order(generated.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return generated[a] > generated[b]; });
  std::vector<int64_t> out(generated.size());
  for (size_t r = 0; r < order.size(); ++r) {
    auto i = order[r];
    // More pending requests than the histogram holds: assume the shortest bin still possible.
    int64_t length = r < lengths.size() ? lengths[r] : upper_bound(bin_of(generated[i] + 1));
    out[i] = std::max<int64_t>(length, generated[i] + 1) - generated[i];
  }
  return out;
}

std::vector<int64_t>
remaining_histogram::expected_remaining(const std::vector<int64_t>& generated) const {
  // Suffix sums: the pending mass at or above each bin, and its (conservative) tokens.
  std::vector<double> count(counts_.size() + 1, 0.0);
  std::vector<double> tokens(counts_.size() + 1, 0.0);
  for (size_t b = counts_.size(); b-- > 0;) {
    count[b] = count[b + 1] + counts_[b];
    tokens[b] = tokens[b + 1] + counts_[b] * double(upper_bound(b));
  }
  std::vector<int64_t> out;
  out.reserve(generated.size());
  for (auto g : generated) {
    const auto b = bin_of(g + 1);
    const double length = count[b] > 0 ? tokens[b] / count[b] : double(upper_bound(b));
    out.push_back(std::max<int64_t>(1, std::llround(length) - g));
  }
  return out;
}

} // namespace loom
