#pragma once
// The pieces every circuit materialisation shares (RFabric Alg. 2, mFabric Alg. 1), pure:
// free-port pools per endpoint, the allocator a policy selects, and the conclusion that sorts,
// validates and accepts or rejects a plan. Internal to fabric/*_plan.cpp.

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/circuit_plan.hpp"

namespace loom::plan_parts {

/// The ports an endpoint may still use, in (device, port) order; taken ones are removed.
class port_pool {
public:
  void add(const ocs_port& p) { free_.insert(p); }
  size_t size() const { return free_.size(); }
  size_t on(uint32_t device) const;
  bool take(const ocs_port& p) { return free_.erase(p) > 0; }
  std::optional<ocs_port> take_on(uint32_t device);
  std::set<uint32_t> devices() const;

private:
  std::set<ocs_port> free_;
};

allocation run_allocator(allocation_policy policy, const std::vector<uint32_t>& ports,
                         const std::vector<demand>& demands, double link_bytes_per_s,
                         const std::function<bool(uint32_t, uint32_t)>& eligible);

physical_circuit make_circuit(const ocs_port& x, const ocs_port& y);

/// One circuit between two pools on the device where both have the most ports left.
std::optional<physical_circuit> take_pair(port_pool& x, port_pool& y);

/// Not masked and not held by another owner's plan.
bool usable(const fabric_model& m, const port_usage& u, const ocs_port& p,
            const std::string& owner);

/// The end of every materialisation: a shortfall, a failed validation or stranded demand is
/// the rejection; otherwise the plan, sorted, with its layout.
materialized conclude(const fabric_model& model, circuit_plan plan, const port_usage& usage,
                      size_t shortfall, std::string_view ends, uint64_t steps,
                      const aggregated_demand* demand);

} // namespace loom::plan_parts
