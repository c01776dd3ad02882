#pragma once
// The step-level remaining-workload histogram (OrchestrRL §4.1): counts of pending requests by
// final output length in fixed-size bins, each bin's upper bound taken as the conservative
// length. Seeded by a forecast at step start, corrected as requests finish and as progress
// rules bins out. Pure.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom {

class remaining_histogram {
public:
  /// Bins [0, w), [w, 2w), ... up to max_tokens (the last bin ends at max_tokens).
  remaining_histogram(int bin_tokens, int64_t max_tokens);

  /// Replaces the counts, e.g. with the forecast for a new step; `counts` has bins() entries
  /// (missing entries count as 0).
  void assign(const std::vector<double>& counts);

  /// A request finished with `output_tokens`: one fewer pending in its bin. If the forecast had
  /// no mass there, the nearest bin above gives it up (the forecast was too long).
  void on_finished(int64_t output_tokens);

  /// Every pending request has generated at least `min_generated` tokens, so no pending
  /// request ends at or below it: the mass of those bins moves to the first possible bin.
  void on_progress(int64_t min_generated);

  /// Conservative remaining tokens per pending request, given how far each has got: the
  /// furthest-along requests are matched to the longest bins (rank matching), and a request is
  /// never assumed to end before the token after its progress.
  std::vector<int64_t> estimate_remaining(const std::vector<int64_t>& generated) const;

  /// Mean remaining tokens per pending request given only its own progress: what placement
  /// balances. Requests equally far along are alike here, whereas rank matching hands them
  /// distinct lengths in an order that says nothing about which one is long.
  std::vector<int64_t> expected_remaining(const std::vector<int64_t>& generated) const;

  size_t bins() const { return counts_.size(); }
  int bin_tokens() const { return bin_; }
  int64_t upper_bound(size_t bin) const;
  size_t bin_of(int64_t tokens) const;
  double count(size_t bin) const { return counts_[bin]; }
  double pending() const;

private:
  int bin_;
  int64_t max_;
  std::vector<double> counts_;
};

} // namespace loom
