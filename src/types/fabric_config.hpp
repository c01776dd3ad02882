#pragma once
// The fabric as configured: PoDs of rail-aligned servers under static EPS ToRs, and OCS
// devices at the aggregation/core tier (RFabric §5.1), per EP region (mFabric §4.2) or per
// rail (Opus §4). Explicit links join device ports; server NIC r of a PoD attaches to that
// PoD's rail-r ToR (the one whose rack holds the server). NICs reach regional and rail OCS
// directly: server i of the PoD (or of the fabric, for a rail) on ports i * nics + k + 1.

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "types/names.hpp"
#include "types/ocs_technology.hpp"

namespace loom {

enum class fabric_kind { none, rfabric, mfabric, opus };
enum class ocs_tier { agg, core, regional, rail };
enum class driver_kind { emulated, tl1, zmq };

template <>
struct enum_names<fabric_kind> {
  static constexpr std::array<std::pair<fabric_kind, std::string_view>, 4> table{{
    {fabric_kind::none, "none"},
    {fabric_kind::rfabric, "rfabric"},
    {fabric_kind::mfabric, "mfabric"},
    {fabric_kind::opus, "opus"},
  }};
};

template <>
struct enum_names<ocs_tier> {
  static constexpr std::array<std::pair<ocs_tier, std::string_view>, 4> table{{
    {ocs_tier::agg, "agg"},
    {ocs_tier::core, "core"},
    {ocs_tier::regional, "regional"},
    {ocs_tier::rail, "rail"},
  }};
};

template <>
struct enum_names<driver_kind> {
  static constexpr std::array<std::pair<driver_kind, std::string_view>, 3> table{{
    {driver_kind::emulated, "emulated"},
    {driver_kind::tl1, "tl1"},
    {driver_kind::zmq, "zmq"},
  }};
};

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
  double link_up_ms = 0;         // NIC link-up after a change, before traffic flows (mFabric §6)
  driver_kind driver = driver_kind::emulated;
  std::string address;           // host:port for tl1
  std::string user;              // tl1 login, from the device's credentials file
  std::string password;
  int timeout_ms = 2000;         // tl1, zmq: per command, and for connecting
  int attempts = 3;              // tl1, zmq: per operation
  std::vector<int> masked_ports; // failed ports, never used for circuits
  std::vector<int> managed_ports; // Loom's beyond those its links give it (a shared switch)
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

struct fabric_config {
  fabric_kind kind = fabric_kind::none;
  double link_gbps = 0;     // per NIC / per port
  int nics_per_server = 0;  // = rails
  std::vector<pod> pods;
  std::vector<tor> tors;
  std::vector<ocs_device> ocs;
  std::vector<fabric_link> links;
};

} // namespace loom
