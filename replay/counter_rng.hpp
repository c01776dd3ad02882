#pragma once
// A counter-based random stream: the n-th draw of stream (seed, a, b) is a pure function of
// those four numbers (SplitMix64's finalizer over a keyed counter), so opening a stream costs
// three multiplies instead of seeding a Mersenne Twister, and draws never depend on the order
// in which streams are opened.

#include <cmath>
#include <cstdint>
#include <numbers>

namespace loom::replay {

class counter_stream {
public:
  counter_stream(uint64_t seed, uint64_t a, uint64_t b)
      : key_{mix(mix(mix(seed) ^ (a + golden)) ^ (b + 2 * golden))} {}

  /// The next 64 uniformly distributed bits.
  uint64_t next() { return mix(key_ + golden * ++counter_); }

  /// Uniform in the open interval (0, 1).
  double uniform() { return (double(next() >> 11) + 0.5) * 0x1.0p-53; }

  /// Standard normal (Box-Muller; the second value of each pair is kept for the next call).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double theta = 2.0 * std::numbers::pi * uniform();
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

private:
  static constexpr uint64_t golden = 0x9e3779b97f4a7c15ULL;

  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  uint64_t key_;
  uint64_t counter_ = 0;
  double spare_ = 0;
  bool has_spare_ = false;
};

} // namespace loom::replay
