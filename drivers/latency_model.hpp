#pragma once
// Reconfiguration latency of an emulated OCS: a lognormal fitted to a mean and a p99, so that
// published figures (OrchestrRL Table 2 means; mFabric §6: 41-47 ms mean, p99 under 70 ms)
// translate directly into samples. Seeded: the same seed gives the same latencies.

#include <chrono>
#include <cstdint>
#include <random>

#include "types/ocs_technology.hpp"

namespace loom {

struct latency_profile {
  double mean_ms = 0;
  double p99_ms = 0; // p99 <= mean means a constant latency

  /// OrchestrRL Table 2 delay as the mean; the tables give no spread, so p99 = 1.5 x mean,
  /// the ratio mFabric measured on its MEMS OCS (§6: ~44 ms mean, < 70 ms p99).
  static latency_profile for_technology(ocs_technology tech);
  /// mFabric §6: measured OCS turnaround, 44 ms mean (41-47 ms), p99 under 70 ms.
  static latency_profile mfabric_measured();
};

class latency_sampler {
public:
  latency_sampler(latency_profile profile, uint64_t seed);

  std::chrono::nanoseconds sample();

  double mu() const { return mu_; }
  double sigma() const { return sigma_; }

private:
  double mu_ = 0;
  double sigma_ = 0;
  double constant_ms_ = 0;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
};

} // namespace loom
