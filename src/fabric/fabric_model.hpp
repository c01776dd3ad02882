#pragma once
// The fabric as the controller computes on it, pure: indices instead of names, and every OCS
// port typed by what it attaches to. RFabric §5.1: servers under static rail-aligned EPS ToRs,
// ToR uplinks into a PoD's OCS-Agg, PoD-boundary ports of the OCS-Agg patched to OCS-Core.
// mFabric §4.2: servers give some NICs to a regional OCS. Opus §4: one photonic OCS per rail.
//
// OCS ports are duplex: duplex port p of a P-port device is input p and output P + p of the
// P x P switch the drivers see, so a full-duplex circuit between ports a and b is the two
// cross-connects a -> P + b and b -> P + a.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types/cluster.hpp"
#include "types/fabric.hpp"
#include "types/fabric_config.hpp"

namespace loom {

struct ocs_port {
  uint32_t device = 0; // index into fabric_model::devices
  uint32_t port = 0;   // duplex port, 1-based
  friend auto operator<=>(const ocs_port&, const ocs_port&) = default;
};

struct fabric_server {
  std::string id;
  uint32_t pod = 0;
  int gpus = 8;
  int numa_nodes = 1; // NICs are split evenly over them, in order (mFabric §5.2)
};

struct fabric_tor {
  std::string id;
  uint32_t pod = 0;
  int rail = 0;
  std::vector<ocs_port> uplinks; // ToR ports patched into OCS-Agg ports
};

struct fabric_device {
  std::string id;
  ocs_tier tier = ocs_tier::agg;
  int pod = -1;  // agg and regional
  int rail = -1; // rail
  uint32_t ports = 0;
  double reconfig_s = 0;
  driver_kind driver = driver_kind::emulated;
  std::string address;
};

/// An OCS-Agg port patched to an OCS-Core port: where a PoD's traffic lifts to the core.
struct boundary_link {
  uint32_t pod = 0;
  ocs_port agg;
  ocs_port core;
};

/// A server NIC wired straight into a regional or rail OCS.
struct nic_link {
  uint32_t server = 0;
  int nic = 0;
  ocs_port port;
};

/// What an OCS port is wired to.
struct port_role {
  enum kind_t : uint8_t { none, tor_uplink, boundary_agg, boundary_core, nic } kind = none;
  uint32_t index = 0; // the ToR, boundary link or NIC link
};

struct fabric_model_result;

class fabric_model {
public:
  /// Indexes a validated configuration; `nodes` give each server's GPU count. Fails when the
  /// wiring is not the shape `config.kind` describes (e.g. a ToR uplink into a core device).
  static fabric_model_result build(const fabric_config& config, const std::vector<node>& nodes);

  fabric_kind kind = fabric_kind::none;
  double link_bytes_per_s = 0;
  int rails = 0;
  std::vector<std::string> pods;
  std::vector<fabric_server> servers;
  std::vector<fabric_tor> tors;
  std::vector<fabric_device> devices;
  std::vector<boundary_link> boundaries;
  std::vector<nic_link> nic_links;

  /// The NIC (and rail) a GPU sends on.
  int nic_of(const rank_ref& r) const;
  /// The ToR a rank's NIC attaches to, or -1.
  int tor_of(const rank_ref& r) const;
  uint32_t pod_of(const rank_ref& r) const { return servers[r.server].pod; }
  int numa_of_nic(uint32_t server, int nic) const;
  std::optional<uint32_t> server_index(std::string_view id) const;
  std::optional<uint32_t> device_index(std::string_view id) const;
  const std::vector<uint32_t>& tors_of_pod(uint32_t pod) const { return pod_tors_[pod]; }
  /// A ToR's position among its PoD's ToRs (its OCS-Agg endpoint, App. D).
  uint32_t local_index(uint32_t tor) const { return tor_local_[tor]; }
  /// A server's position among its PoD's servers (its regional OCS endpoint, mFabric §5.2).
  uint32_t local_server(uint32_t server) const { return server_local_[server]; }
  const port_role& role(const ocs_port& p) const { return roles_[slot(p)]; }
  /// A dense index over every device's duplex ports, for per-port tables.
  size_t slot(const ocs_port& p) const { return port_offset_[p.device] + p.port; }
  size_t slots() const { return port_offset_.empty() ? 0 : port_offset_.back(); }

  /// Ports never used for circuits: failed OCS ports (App. H) and the NIC links of failed
  /// servers.
  bool masked(const ocs_port& p) const;
  /// A failed OCS port (App. H), masked for good.
  void mask(const ocs_port& p);
  bool port_failed(const ocs_port& p) const { return masked_[slot(p)]; }
  /// Loom's to patch, read back and repair: wired by a link or listed in `managed_ports`. On a
  /// shared switch every other port is someone else's and left alone.
  bool managed(const ocs_port& p) const {
    return roles_[slot(p)].kind != port_role::none || managed_[slot(p)];
  }
  /// A managed port that someone else's cross-connect holds (read back from the switch): not
  /// planned over until a read-back finds it free.
  void hold(const ocs_port& p, bool held) { held_[slot(p)] = held; }
  /// A failed server (§5.4 (i)): its NIC links stop counting until it is back.
  void fail_server(uint32_t server) { failed_[server] = true; }
  void recover_server(uint32_t server) { failed_[server] = false; }
  bool failed(uint32_t server) const { return failed_[server]; }

private:
  // The steps of build(); each returns why the wiring is wrong, or nothing.
  void index_servers(const fabric_config& config, const std::vector<node>& nodes);
  void index_devices(const fabric_config& config);
  std::string attach_tors(const fabric_config& config);
  std::string wire_links(const fabric_config& config);
  void index_ports();
  std::string wire_nics(const fabric_config& config);
  std::optional<uint32_t> pod_index(std::string_view id) const;

  std::vector<int> tor_index_;              // server * rails + rail -> ToR, or -1
  std::vector<std::vector<uint32_t>> pod_tors_;
  std::vector<uint32_t> tor_local_;
  std::vector<uint32_t> server_local_;
  std::vector<size_t> port_offset_;         // per device, then the total (index 0 unused)
  std::vector<port_role> roles_;
  std::vector<bool> masked_;
  std::vector<bool> managed_;
  std::vector<bool> held_;
  std::vector<bool> failed_;
};

/// A fabric model, or why the configuration does not describe one.
struct fabric_model_result {
  std::optional<fabric_model> value;
  std::string error; // non-empty exactly when value is empty
};

} // namespace loom
