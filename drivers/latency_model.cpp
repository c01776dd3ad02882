#include "drivers/latency_model.hpp"

#include <cmath>

namespace loom {

latency_profile latency_profile::for_technology(ocs_technology tech) {
  for (auto& t : ocs_technologies())
    if (t.technology == tech)
      return {t.reconfig_ms, 1.5 * t.reconfig_ms};
  return {};
}

latency_profile latency_profile::mfabric_measured() {
  return {44.0, 65.0};
}

latency_sampler::latency_sampler(latency_profile p, uint64_t seed) : rng_(seed) {
  // For a lognormal, mean = exp(mu + s^2/2) and p99 = exp(mu + z s) with z = 2.3263; so
  // ln(p99/mean) = z s - s^2/2, the smaller root of which is s = z - sqrt(z^2 - 2 ln r).
  constexpr double z = 2.3263478740408408;
  double r = p.mean_ms > 0 ? p.p99_ms / p.mean_ms : 0;
  if (r <= 1 || 2 * std::log(r) >= z * z) {
    constant_ms_ = p.mean_ms;
    return;
  }
  sigma_ = z - std::sqrt(z * z - 2 * std::log(r));
  mu_ = std::log(p.mean_ms) - sigma_ * sigma_ / 2;
}

std::chrono::nanoseconds latency_sampler::sample() {
  double ms = constant_ms_ > 0 || sigma_ == 0 ? constant_ms_
                                              : std::exp(mu_ + sigma_ * normal_(rng_));
  return std::chrono::nanoseconds{static_cast<int64_t>(ms * 1e6)};
}

} // namespace loom
