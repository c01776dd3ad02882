#pragma once
// Token buckets for the gateway's inbound frames, pure, by a name: a registered session's
// connection (each engine or worker of a deployment its own budget, whatever key they share)
// or, for frames of no session, the client key (one bucket each; "" in insecure mode). The
// gateway drops the buckets of connections whose sessions ended, so the table stays as bounded
// as the live sessions and the keys directory.

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

  /// Keeps only the buckets whose key `keep` accepts.
  template <class Keep>
  void retain(Keep keep) {
    std::erase_if(buckets_, [&](auto& b) { return !keep(b.first); });
  }

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
