#pragma once
// Per-key token buckets for the gateway's inbound frames, pure: one key may not take the
// gateway from the others. Keys are the configured client keys (one bucket each; "" in
// insecure mode), so the table is as bounded as the keys directory.

#include <chrono>
#include <map>
#include <string>

namespace loom {

class rate_limiter {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// `per_second` frames sustained per key, bursts of up to `burst`; 0 turns limiting off.
  rate_limiter(double per_second, double burst) : rate_(per_second), burst_(burst) {}

  /// Takes one frame of `key` at `now`: false if its bucket is empty.
  bool admit(const std::string& key, time_point now);

private:
  struct bucket {
    double tokens;
    time_point refilled;
  };
  double rate_;
  double burst_;
  std::map<std::string, bucket, std::less<>> buckets_;
};

} // namespace loom
