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

/// What a finished fan-out of diffs reports: the first error, if any, and the slowest apply
/// and link-up.
struct apply_outcome {
  std::optional<std::string> error;
  double latency_s = 0;
  double ready_s = 0; // until the new circuits carry traffic
};

/// Applies every device's diff at once; when one fails, the devices that took theirs are
/// rolled back, so the fabric is left as it was.
void apply_all(self_ptr self, const std::map<uint32_t, xc_diff>& diffs,
               std::function<void(apply_outcome)> done);

/// The down (or not yet read back) devices among these, as a reason to keep a plan back;
/// empty if all are usable.
std::string unavailable(self_ptr self, const std::map<uint32_t, xc_diff>& diffs);

/// A device failed an apply: one unreachable or silent is down until a poll finds it back.
void apply_failed(self_ptr self, uint32_t device, const caf::error& err);

/// Every device's OCS gauges and counters, there at zero before its first poll (live mode).
void device_metrics_at_zero(self_ptr self);
/// Polls every device's health (App. H): down and back, alarms masked, repaired after.
void poll_devices(self_ptr self);

/// RFabric App. H: a failed port is masked; the owners whose plans use it re-plan around it at
/// their next window (returned). Durable before `done` runs.
void mask(self_ptr self, uint32_t device, uint32_t port, std::function<void(std::vector<std::string>)> done,
          std::function<void(caf::error)> failed);

/// Answers a committed decision after `delay_s` (the link-up delay), at once if none.
void answer_when_up(self_ptr self, caf::typed_response_promise<fabric_decision> promise,
                    const fabric_decision& d, double delay_s);

/// Materialises the owner's pending intent and commits it if the window allows (Alg. 2).
caf::result<fabric_decision> try_commit(self_ptr self, const std::string& owner,
                                        const commit_window& window);

/// An Opus job's rails: programmed to its initial topology, then answered with its phase
/// table (learned from the traces it brings, now or when it registers again).
caf::result<opus_registration> register_opus(self_ptr self, const opus_job& job);

/// The Opus jobs a restart brings back (opus_jobs records): each on the topology its rails
/// carried, with the phase table its stored traces give.
void restore_opus(self_ptr self, const std::vector<stored_record>& restored);

/// A rank's topo_write, answered once its transition is on the rails.
caf::result<topo_ack> topo_write_to(self_ptr self, const std::string& job, const topo_write& w);

/// The job is done (Opus §7): its circuits leave its rails, its record goes, and its ports are
/// free for the next job; answered once that is durable.
caf::result<ok_atom> end_opus(self_ptr self, const std::string& job);

} // namespace loom::controller_steps
