#pragma once
// Cross-connects of an optical circuit switch and the messages that change them, following the
// OCS SAI draft and real N x M switches: inputs 1..N, outputs N+1..N+M, each port in at most
// one cross-connect, re-patching is a remove then an add.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

namespace loom {

struct cross_connect {
  uint32_t in = 0;
  uint32_t out = 0;

  friend bool operator==(const cross_connect&, const cross_connect&) = default;
  friend auto operator<=>(const cross_connect&, const cross_connect&) = default;
};

/// One reconfiguration: removes first, then adds. Cross-connects in neither list stay up.
struct xc_diff {
  std::vector<cross_connect> removes;
  std::vector<cross_connect> adds;
};

/// What an applied diff cost.
struct apply_report {
  int64_t latency_ns = 0;  // from request to the device confirming every change
  int64_t ready_ns = 0;    // until the new circuits carry traffic (adds link-up delay)
  uint32_t attempts = 1;   // > 1 when the driver reconnected and resumed
};

struct driver_health {
  std::string device;
  bool connected = false;
  uint64_t applies = 0;
  uint64_t failures = 0;
  uint32_t cross_connects = 0;
  std::string last_error;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cross_connect& x) {
  return f(caf::meta::type_name("cross_connect"), x.in, x.out);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, xc_diff& x) {
  return f(caf::meta::type_name("xc_diff"), x.removes, x.adds);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, apply_report& x) {
  return f(caf::meta::type_name("apply_report"), x.latency_ns, x.ready_ns, x.attempts);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, driver_health& x) {
  return f(caf::meta::type_name("driver_health"), x.device, x.connected, x.applies, x.failures,
           x.cross_connects, x.last_error);
}

} // namespace loom
