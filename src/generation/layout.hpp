#pragma once
// Laying a deployment's instances over its engines (OrchestrRL §4.1's logical instances on
// real GPU groups). An engine is one node's server; an instance no wider than an engine lives
// inside one, a wider one takes whole engines (cross-node TP, EP and AFD in whole nodes, as
// the planner's candidates are). Pure.

#include <cstdint>
#include <string>
#include <vector>

#include "types/generation.hpp"

namespace loom {

struct engine_slot {
  std::string engine;
  int gpus = 0;
};

/// As many instances of `config` as the engines carry, in the engines' order, numbered from
/// `first_id`. Engines too small for one instance and the GPUs left over carry none.
std::vector<instance_slot> lay_out(const parallel_config& config,
                                   const std::vector<engine_slot>& engines, uint32_t first_id);

/// `d`'s instances over the engines, numbered from 0 as `d` numbers them (a mixed deployment's
/// latency instances last). Wider instances are placed first, each where it first fits; fewer
/// than d.size() slots when the engines cannot carry them all.
std::vector<instance_slot> lay_out(const gen_deployment& d, const std::vector<engine_slot>& engines);

/// The instances `engine` leads, and those it only lends GPUs to.
std::vector<uint32_t> led_by(const std::vector<instance_slot>& slots, const std::string& engine);
std::vector<instance_slot> carried_by(const std::vector<instance_slot>& slots,
                                      const std::string& engine);

} // namespace loom
