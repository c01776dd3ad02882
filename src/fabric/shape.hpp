#pragma once
// Regular RFabric shapes (§5.1, Fig. 7) written as the configuration they stand for, so replay
// scenarios and benchmarks go through the same fabric_model::build as `loom serve`: PoDs of
// racks, one rail-aligned ToR per rack and rail, ToR uplinks into the PoD's OCS-Agg, and PoD
// boundary ports of each OCS-Agg patched round-robin onto the OCS-Core devices.

#include <vector>

#include "types/cluster.hpp"
#include "types/fabric_config.hpp"

namespace loom {

struct rfabric_shape {
  int pods = 1;
  int racks_per_pod = 1;
  int servers_per_rack = 4;
  int gpus_per_server = 8;   // one NIC per GPU: as many rails
  int tor_uplinks = 4;       // per ToR, into the OCS-Agg
  int boundary_ports = 0;    // per PoD, OCS-Agg to OCS-Core
  int core_devices = 1;
  double link_gbps = 200;
  double agg_reconfig_ms = 25; // OrchestrRL §7.2 default
  double core_reconfig_ms = 25;
};

struct shaped_fabric {
  fabric_config config;
  std::vector<node> nodes;
};

shaped_fabric make_rfabric(const rfabric_shape& shape);

/// One mFabric EP region (§4.2): servers whose `ocs_nics` NICs each (spread evenly over the
/// server's NICs, so over its NUMA nodes) go to one regional OCS, the others to EPS rail ToRs.
struct mfabric_shape {
  int servers = 8;
  int gpus_per_server = 8; // one NIC per GPU
  int ocs_nics = 4;
  double link_gbps = 200;
  double reconfig_ms = 44; // mFabric §6's measured mean turnaround
};

shaped_fabric make_mfabric_region(const mfabric_shape& shape);

} // namespace loom
