#pragma once
// The fabric as configured: PoDs of rail-aligned servers under static EPS ToRs, and OCS
// devices at the aggregation/core tier (RFabric §5.1), per EP region (mFabric §4.2) or per
// rail (Opus §4). Explicit links join device ports; server NIC r of a PoD attaches to that
// PoD's rail-r ToR (the one whose rack holds the server). NICs reach regional and rail OCS
// directly: server i of the PoD (or of the fabric, for a rail) on ports i * nics + k + 1.

#include <string>
#include <string_view>
#include <vector>

#include "core/ocs_technology.hpp"

namespace loom {

enum class fabric_kind { none, rfabric, mfabric, opus };
enum class ocs_tier { agg, core, regional, rail };
enum class driver_kind { emulated, tl1, zmq };

std::string_view to_string(fabric_kind x);
std::string_view to_string(ocs_tier x);
std::string_view to_string(driver_kind x);

struct pod {
  std::string id;
  std::vector<std::string> servers; // node ids from the cluster
};

struct tor {
  std::string id;
  std::string pod;
  int rail = 0;
  int ports = 0;
  std::vector<std::string> servers; // the rack it serves; empty = every server of the PoD
};

struct ocs_device {
  std::string id;
  ocs_tier tier = ocs_tier::agg;
  std::string pod; // agg and regional devices serve one PoD
  int rail = -1;   // rail devices serve one rail
  int ports = 0;
  ocs_technology technology = ocs_technology::mems;
  double reconfig_ms = 0;
  driver_kind driver = driver_kind::emulated;
  std::string address;           // host:port for tl1, ZeroMQ identity for zmq
  std::vector<int> masked_ports; // failed ports, never used for circuits
  std::vector<int> nics;         // regional: the NICs each server of the PoD gives the OCS
};

struct port_ref {
  std::string device;
  int port = 0; // 1-based
};

struct fabric_link {
  port_ref a;
  port_ref b;
};

struct fabric_topology {
  fabric_kind kind = fabric_kind::none;
  double link_gbps = 0;     // per NIC / per port
  int nics_per_server = 0;  // = rails
  std::vector<pod> pods;
  std::vector<tor> tors;
  std::vector<ocs_device> ocs;
  std::vector<fabric_link> links;
};

} // namespace loom
