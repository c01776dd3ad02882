#pragma once
// A deployment restored from the store as a restart finds it: the generation component reads
// and decodes its own records, as the scheduler and the fabric controller decode theirs.

#include <string>
#include <vector>

#include <caf/expected.hpp>

#include "generation/gen_controller.hpp"
#include "protocol/actors.hpp"

namespace loom {

struct deployment_restored {
  gen_controller_restore controller;                 // its record, the running step's batch
  gen_forecast forecast;            // what its planner keeps
};

/// What the store kept of deployment `name`; empty parts where it kept nothing, an error
/// (storage_corrupted) where a record does not decode.
caf::expected<deployment_restored> restore_deployment(caf::actor_system& sys,
                                                      const store_actor& store,
                                                      const std::string& name);

} // namespace loom
