#pragma once
// What the runtime (replay now, workers through the gateway later) and the fabric controller
// tell each other: intents with their commit windows up, decisions down (RFabric §5.3), and
// Opus topo_writes with their ACKs (Opus §4.1).

#include <cstdint>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "fabric/demand.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/opus_controller.hpp"
#include "fabric/safe_window.hpp"

namespace loom {

/// The controller's answer to an intent or a window.
struct fabric_decision {
  std::string owner;
  std::string outcome; // committed | unchanged | deferred (retry in a later window) | kept
                       // (no valid plan: the previous one stays, retried later)
  std::string reason;
  uint64_t version = 0;   // of the plan in force afterwards
  uint32_t circuits = 0;  // of that plan
  uint32_t changed = 0;   // cross-connects removed plus added
  double reconfig_s = 0;  // slowest device's measured update
  double exposed_s = 0;   // update time the window did not cover
};

struct fabric_plan_status {
  std::string owner;
  std::string stage;
  uint64_t version = 0;
  uint32_t circuits = 0;
  std::vector<std::string> devices;
};

/// An Opus job on photonic rails: its layout and one rail OCS per rail it uses.
struct opus_job {
  std::string job;
  int pp = 1;
  std::vector<int> symmetrical;
  std::vector<std::string> rails;
  std::string initial; // topo_id digits the rails start in
};

struct topo_ack {
  std::string topo;      // the job's topo_id after the write's transition
  bool fallback = false; // the rails run the static giant ring (Opus §4.2 faults)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rank_ref& x) {
  return f(caf::meta::type_name("rank_ref"), x.server, x.gpu);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, primitive_share& x) {
  return f(caf::meta::type_name("primitive_share"), x.kind, x.fraction);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_intent& x) {
  return f(caf::meta::type_name("fabric_intent"), x.owner, x.stage, x.mix, x.members,
           x.bytes, x.group_size);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, circuit_count& x) {
  return f(caf::meta::type_name("circuit_count"), x.a, x.b, x.circuits);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, circuit_layout& x) {
  return f(caf::meta::type_name("circuit_layout"), x.agg, x.core);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, commit_window& x) {
  return f(caf::meta::type_name("commit_window"), x.kind, x.expected_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_decision& x) {
  return f(caf::meta::type_name("fabric_decision"), x.owner, x.outcome, x.reason, x.version,
           x.circuits, x.changed, x.reconfig_s, x.exposed_s);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, fabric_plan_status& x) {
  return f(caf::meta::type_name("fabric_plan_status"), x.owner, x.stage, x.version, x.circuits,
           x.devices);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, opus_job& x) {
  return f(caf::meta::type_name("opus_job"), x.job, x.pp, x.symmetrical, x.rails, x.initial);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, topo_write& x) {
  return f(caf::meta::type_name("topo_write"), x.group, x.op_index, x.group_size, x.stage,
           x.digit);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, topo_ack& x) {
  return f(caf::meta::type_name("topo_ack"), x.topo, x.fallback);
}

} // namespace loom
