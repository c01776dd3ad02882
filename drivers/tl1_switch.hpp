#pragma once
// The switch behind `loom ocs-emu`: executes TL1 commands against an N x M cross-connect table
// (pure: the server does the I/O). One instance is shared by every session, like a real switch.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "drivers/tl1_codec.hpp"
#include "drivers/xc_table.hpp"

namespace loom {

struct tl1_switch_options {
  switch_size size{16, 16};
  std::string user = "admin";
  std::string password = "root";
  std::string sid = "LOOM-OCS";
  std::set<uint32_t> failed_ports; // ENT-PATCH on them is denied with SROF; alarmed
  // Cross-connects it carries from the start, as a switch keeps its patches through a restart
  // of its controller; those that break the cross-connect model are left out.
  std::vector<cross_connect> patches;
  // Alarm lines in GR-833's layout ("<port>,PORT:MJ,LOS,SA") instead of "<port>:MJ,LOS,SA",
  // and equipment alarms ("FAN-2,EQPT:MN,FANFLT,NSA") that concern no port.
  bool gr833_alarms = false;
  std::vector<std::string> equipment_alarms;
};

struct tl1_session {
  bool logged_in = false;
  std::string user;
};

class tl1_switch {
public:
  explicit tl1_switch(tl1_switch_options options);

  tl1::reply execute(tl1_session& session, const tl1::command& cmd);

  /// Commands that change cross-connects (delayed and counted by the emulator).
  static bool mutates(const tl1::command& cmd);

  /// A port fails now: it raises an alarm (loss of light) and takes no new cross-connect; one
  /// it carries stays patched, dark, until removed.
  void fail_port(uint32_t port);

  const xc_table& table() const { return table_; }
  const tl1_switch_options& options() const { return options_; }

private:
  tl1::reply ent_patch(const tl1::command& cmd);
  tl1::reply dlt_patch(const tl1::command& cmd);
  tl1::reply rtrv_patch(const tl1::command& cmd);
  tl1::reply rtrv_port_power(const tl1::command& cmd);
  tl1::reply rtrv_alm_all(const tl1::command& cmd);
  /// The read-only and port-state commands third-party clients send besides patching: header,
  /// inventory, shutters, labels, attenuation (nothing Loom's driver needs, all answered).
  std::optional<tl1::reply> port_state(const tl1::command& cmd);

  tl1_switch_options options_;
  xc_table table_;
  std::set<uint32_t> shut_;                 // ports whose shutter is closed
  std::map<uint32_t, std::string> labels_;
  std::map<uint32_t, double> atten_db_;
};

} // namespace loom
