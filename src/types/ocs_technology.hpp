#pragma once
// Commodity OCS technologies and their reconfiguration delay and radix (OrchestrRL Table 2).

#include <optional>
#include <string_view>
#include <vector>

namespace loom {

enum class ocs_technology { rotor, mems, piezo, liquid_crystal, robotic };

struct ocs_technology_info {
  ocs_technology technology;
  std::string_view name;       // as written in config
  double reconfig_ms;          // representative reconfiguration delay
  int radix_ports;             // representative port count
};

const std::vector<ocs_technology_info>& ocs_technologies();

std::optional<ocs_technology_info> find_ocs_technology(std::string_view name);

} // namespace loom
