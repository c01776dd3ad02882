#pragma once
// Topology materialisation, RFabric Alg. 2 (with App. D), pure: from a template and a period's
// aggregated demand, allocate circuit multiplicities on the OCS-Core (PoDs) and on each PoD's
// OCS-Agg (ToRs and the boundary), map them to concrete duplex ports, and validate the result
// against the fabric state: ports unmasked and not held by another owner, and the Core-Agg
// coupling (every boundary port the core uses is lifted/dropped by an Agg circuit). A plan
// that fails validation is rejected with the reason; the caller keeps the previous plan.
//
// Circuits of the previous plan between the same endpoints are kept on their ports, so a new
// plan only touches what changed (non-blocking reconfiguration, §5.4). mFabric's regional OCS
// (§5.2, Alg. 1) allocates between servers and permutes multi-circuit pairs across NUMA nodes.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fabric/demand.hpp"
#include "fabric/fabric_model.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/stage_template.hpp"
#include "types/common.hpp"

namespace loom {

/// One full-duplex circuit between duplex ports a < b of one OCS.
struct physical_circuit {
  uint32_t device = 0;
  uint32_t a = 0;
  uint32_t b = 0;
  friend auto operator<=>(const physical_circuit&, const physical_circuit&) = default;
};

struct circuit_plan {
  uint64_t version = 0;
  std::string owner;
  std::string intent; // fabric_intent::signature()
  fabric_stage stage = fabric_stage::train_compute;
  circuit_layout layout;                  // multiplicities, for the flow model and reports
  std::vector<physical_circuit> circuits; // sorted
};

/// How a plan's circuits are allocated: App. D Alg. 3 with Loom's multi-hop refinement
/// (fabric/hop_refine.hpp), Alg. 3 alone (replay's column for the paper's own allocator), or
/// App. I's traffic-oblivious baselines (uniform over the demanded pairs, or over every pair of
/// switches).
enum class allocation_policy { traffic_aware, algorithm_3, uniform, uniform_all };

/// Which owner's committed plan holds each OCS port.
class port_usage {
public:
  explicit port_usage(const fabric_model& model);
  void claim(const circuit_plan& plan);
  void release(const circuit_plan& plan);
  /// Held by an owner other than `owner`.
  bool busy_for(const ocs_port& port, const std::string& owner) const;

private:
  const fabric_model* model_;
  std::vector<std::string> owner_; // per port slot
};

struct materialized {
  std::optional<circuit_plan> plan;
  std::string rejection; // why there is no plan
  uint64_t allocator_steps = 0;
};

/// AllocateCircuits and Validate of Alg. 2 for RFabric tiers.
materialized materialize_plan(const fabric_model& model, const stage_template& tpl,
                              const aggregated_demand& demand, const port_usage& usage,
                              const std::string& owner, const circuit_plan* previous = nullptr,
                              allocation_policy policy = allocation_policy::traffic_aware);

/// mFabric Alg. 1 on one PoD's regional OCS: server demand (server_demand()) to NIC circuits.
materialized materialize_regional(const fabric_model& model, uint32_t pod,
                                  const std::vector<demand>& servers, const port_usage& usage,
                                  const std::string& owner, const circuit_plan* previous = nullptr);

/// mFabric §4.2: one regional plan per PoD the template spans, merged into one plan; the first
/// region that cannot be planned is the rejection.
materialized materialize_regions(const fabric_model& model, const stage_template& tpl,
                                 const std::vector<rank_flow>& flows, const port_usage& usage,
                                 const std::string& owner, const circuit_plan* previous);

/// Alg. 2 lines 3-6 for an owner's intent on the fabric's tiers: the flows it plans for
/// (planned_flows, without those of failed servers), then RFabric's aggregated demand on Core
/// and Agg, or mFabric's regions.
materialized materialize_intent(const fabric_model& model, const stage_template& tpl,
                                const fabric_intent& intent, const port_usage& usage,
                                const circuit_plan* previous);

/// The multiplicities concrete circuits provide: per PoD over pod_demand endpoints (ToRs then
/// the boundary) or over its servers (regional OCS), and PoD pairs on the core.
circuit_layout layout_of(const fabric_model& model, const std::vector<physical_circuit>& circuits);

/// Validate(C, S): the reason the plan cannot be committed now, or empty.
std::string validate_plan(const fabric_model& model, const circuit_plan& plan,
                          const port_usage& usage);

/// The cross-connects a device carries for these circuits (a -> P + b and b -> P + a).
std::vector<cross_connect> device_cross_connects(const fabric_model& model,
                                                 const std::vector<physical_circuit>& circuits,
                                                 uint32_t device);

/// Per device, the diff that turns `from` into `to`; circuits in both are not touched.
std::map<uint32_t, xc_diff> plan_diff(const fabric_model& model,
                                      const std::vector<physical_circuit>& from,
                                      const std::vector<physical_circuit>& to);

/// The OCS ports a plan occupies.
std::vector<ocs_port> plan_ports(const circuit_plan& plan);

} // namespace loom
