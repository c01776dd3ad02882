#pragma once
// The thresholds the papers name, in one place, so operators tune them in config.

#include <cstdint>

#include "types/names.hpp"

namespace loom {

/// What WEAVE's admission check (§4.2, Alg. 1 line 10) holds each member's iterations to.
enum class slo_bound : uint8_t {
  worst_case_schedule, // the round robin at every phase's worst case, the join included (§4.2)
  any_realization,     // also any single iteration whatever the phases realize below it
};

template <>
struct enum_names<slo_bound> {
  static constexpr std::array<std::pair<slo_bound, std::string_view>, 2> table{{
    {slo_bound::worst_case_schedule, "worst_case_schedule"},
    {slo_bound::any_realization, "any_realization"},
  }};
};

struct weave_policy {
  double tail_migration_threshold = 0.8; // WEAVE §4.3: fraction of responses done
  int max_group_size = 4;                // jobs per co-execution group
  // The worst-case schedule bounds every iteration's end, not every iteration's length: one
  // that follows an iteration whose phases ran short can exceed it. any_realization bounds
  // that too, at the cost of fewer packings.
  slo_bound admission_bound = slo_bound::worst_case_schedule;
  double default_slo = 1.5;              // tolerated slowdown vs. solo when a job names none
  // Phase switching (WEAVE §3 C3, Fig. 4): a warm start loads the per-node working set from
  // host DRAM at PCIe speed; a cold start re-initialises the control plane and fetches the state
  // from disk or across the cluster link (up to 135 s for hundreds of GB).
  double warm_start_gbps_per_gpu = 25;   // GB/s host -> GPU per GPU
  double cold_start_init_s = 60;         // control-plane initialisation (NCCL, engines)
  double cold_start_gbps = 2;            // GB/s from checkpoint storage per node
  double tail_migration_cost_s = 2;      // WEAVE §4.3: re-prefill of the consolidated tail
  bool topology_aware_sync = true;       // WEAVE §5.2: one copy across the link, then broadcast
  double intra_cluster_gbps = 400;       // InfiniBand per node, for the broadcast stage
  // WEAVE §5.3 stragglers, as multiples of a phase's worst case (plus its switch): past the
  // first a phase is reported as overrunning and handled by the drift path; past the second
  // its job fails alone and its group goes on.
  double overrun_factor = 2;
  double stuck_factor = 10;
  // WEAVE §5.3 drift, with hysteresis: a member counts as drifted only once its longest
  // measured phases exceed the profile it was placed with by this fraction (and then only if
  // its group saturates or an SLO breaks); it is re-placed with them grown by the same
  // fraction, so the next re-placement needs as large a change again.
  double drift_margin = 0.1;
  // Consolidation (beyond the paper, which never regroups): after a departure, the group's
  // members are placed again if that saves more over their remaining lives than restarts cost.
  bool consolidate = true;
};

struct planner_policy {
  double period_s = 30;        // OrchestrRL §4.1: planning period inside a Gen step
  double epsilon_s = 2;        // Alg. 1 event 1: required gain Obj_cur - Obj_new - cost
  int histogram_bin_tokens = 256; // §4.1 remaining-workload histogram bin width
};

struct balancer_policy {
  double theta = 0.25;   // OrchestrRL §4.2: max-min LoadIndex gap that triggers migration
  double tick_ms = 500;  // monitoring interval
};

struct fabric_policy {
  double safe_window_margin_ms = 5; // RFabric §5.3: slack required beyond the OCS delay
  uint32_t health_poll_ms = 1000;    // RFabric App. H: every device's health and alarms; 0: never
  uint32_t port_masks_per_minute = 8; // alarmed ports masked per device per minute, at most
};

struct policy {
  weave_policy weave;
  planner_policy planner;
  balancer_policy balancer;
  fabric_policy fabric;
};

} // namespace loom
