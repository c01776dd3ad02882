#pragma once
// The cross-connect state of one N x M switch and the model checks every driver applies before
// anything is sent to a device (pure: no I/O).

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "types/common.hpp"

namespace loom {

struct switch_size {
  uint32_t inputs = 0;  // ports 1..inputs
  uint32_t outputs = 0; // ports inputs+1..inputs+outputs
};

/// The largest side a switch may report. Real OCS reach about 1,000 ports a side (Polatis
/// 576, Calient 320); a reply beyond this is refused, so a hostile or broken switch cannot
/// make Loom allocate tables of its choosing.
inline constexpr uint32_t max_switch_ports = 4096;

/// Why a diff breaks the model.
struct xc_violation {
  enum class kind { invalid_port, masked_port, duplicate_port, port_in_use, no_such_cross_connect };
  kind what;
  uint32_t port; // the offending port
  std::string message;
};

class xc_table {
public:
  explicit xc_table(switch_size size, std::set<uint32_t> masked = {});

  /// Why the diff violates the model, or nothing if it may be sent: ports out of range or on
  /// the wrong side, masked ports, a port used twice in the diff, removing a cross-connect that
  /// does not exist, adding on a port still in use after the removes.
  std::optional<xc_violation> check(const xc_diff& diff) const;

  /// Applies a diff that passed check().
  void apply(const xc_diff& diff);

  /// Replaces the whole state (e.g. after reading it back from the device).
  void assign(const std::vector<cross_connect>& xcs);

  /// The diff that turns this state into `target`; cross-connects in both stay untouched.
  xc_diff diff_to(const std::vector<cross_connect>& target) const;

  std::vector<cross_connect> list() const; // sorted by input port
  std::optional<uint32_t> output_of(uint32_t in) const;
  std::optional<uint32_t> input_of(uint32_t out) const;
  size_t size() const { return count_; }
  switch_size geometry() const { return size_; }
  bool is_input(uint32_t port) const { return port >= 1 && port <= size_.inputs; }
  bool is_output(uint32_t port) const {
    return port > size_.inputs && port - size_.inputs <= size_.outputs;
  }
  const std::set<uint32_t>& masked() const { return masked_; }
  void mask(uint32_t port) { masked_.insert(port); }

private:
  switch_size size_;
  std::set<uint32_t> masked_;
  // Dense maps (switch radix is at most ~1000 ports): 0 means free.
  std::vector<uint32_t> out_of_; // indexed by input port
  std::vector<uint32_t> in_of_;  // indexed by output port - inputs
  size_t count_ = 0;
};

} // namespace loom
