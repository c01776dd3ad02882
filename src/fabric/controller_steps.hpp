#pragma once
// The fabric controller's steps, shared by its sources (fabric_controller.cpp: the behaviour
// and restart; fabric_commit.cpp: intents and windows; fabric_opus.cpp: Opus rails). Internal.

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "fabric/fabric_controller.hpp"

namespace loom::controller_steps {

using self_ptr = fabric_controller_actor::stateful_pointer<fabric_controller_state>;

/// What a finished fan-out of diffs reports: the first error, if any, and the slowest apply.
struct apply_outcome {
  std::optional<std::string> error;
  double latency_s = 0;
};

/// Applies every device's diff at once; when one fails, the devices that took theirs are
/// rolled back, so the fabric is left as it was.
void apply_all(self_ptr self, const std::map<uint32_t, xc_diff>& diffs,
               std::function<void(apply_outcome)> done);

/// Materialises the owner's pending intent and commits it if the window allows (Alg. 2).
caf::result<fabric_decision> try_commit(self_ptr self, const std::string& owner,
                                        const commit_window& window);

/// An Opus job's rails: programmed to its initial topology, then answered.
caf::result<ok_atom> register_opus(self_ptr self, const opus_job& job);

/// A rank's topo_write, answered once its transition is on the rails.
caf::result<topo_ack> topo_write_to(self_ptr self, const std::string& job, const topo_write& w);

} // namespace loom::controller_steps
