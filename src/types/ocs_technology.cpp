#include "types/ocs_technology.hpp"

#include "types/catalog.hpp"

namespace loom {

const std::vector<ocs_technology_info>& ocs_technologies() {
  static const std::vector<ocs_technology_info> table{
    {ocs_technology::rotor, "rotor", 0.01, 128},           // RotorNet (InFocus)
    {ocs_technology::mems, "mems", 10.0, 320},             // 3D MEMS (Calient)
    {ocs_technology::piezo, "piezo", 25.0, 576},           // Piezo (Polatis)
    {ocs_technology::liquid_crystal, "liquid_crystal", 100.0, 512}, // Coherent
    {ocs_technology::robotic, "robotic", 120000.0, 1008},  // Telescent
  };
  return table;
}

std::optional<ocs_technology_info> find_ocs_technology(std::string_view name) {
  return find_by_name(ocs_technologies(), name);
}

} // namespace loom
