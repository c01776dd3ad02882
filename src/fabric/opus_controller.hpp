#pragma once
// Opus control logic (Opus §4.1-4.2, App. B), pure.
//
// The phase table is learned from a profiled communication trace: consecutive operations of
// one stage that belong to the same parallelism dimension form a phase; its first and last
// operations are where the shim reconfigures (pre_comm, on demand) or provisions (post_comm of
// the previous phase's last operation, speculatively).
//
// The controller is the job's topo_write barrier: a ready counter per (communication group,
// operation index); when it reaches the group size the requested digits are applied to the
// rail's topo_id, and the stages whose sub-mappings change are handed to the orchestrator
// (empty: O1, nothing to reprogram). Ranks are acknowledged only after the orchestrator
// confirms the reconfiguration.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fabric/topo_id.hpp"
#include "types/fabric.hpp"

namespace loom {

/// One operation of a stage's profiled trace: dim 0 is PP Send/Recv, d >= 1 the symmetrical
/// dimension that owns digit d (DP = 1, CP = 2, ...).
struct traced_op {
  int dim = 0;
  double bytes = 0;
};

struct comm_phase {
  int dim = 0;
  size_t first = 0; // operation indices in the stage's trace
  size_t last = 0;
};

/// Opus §4.2 profiling: the phases of one stage's trace, in order.
std::vector<comm_phase> learn_phases(const std::vector<traced_op>& trace);

struct topo_transition {
  std::string group;
  uint64_t op_index = 0;
  topo_id from;
  topo_id to;
  std::vector<int> reprogram; // stages whose sub-mappings change; empty = O1
};

class opus_controller {
public:
  explicit opus_controller(topo_id initial) : current_(initial), planned_(std::move(initial)) {}

  /// Counts a write; the transition once the group's last writer arrives. Transitions chain:
  /// each starts from the one before, confirmed or not (the orchestrator applies them in order).
  std::optional<topo_transition> write(const topo_write& w);
  /// The orchestrator confirmed `t`: it is the rail's topology now.
  void confirm(const topo_transition& t) { current_ = t.to; }
  const topo_id& current() const { return current_; }
  size_t pending() const { return ready_.size(); }

private:
  struct ready {
    int count = 0;
    std::vector<std::pair<int, uint8_t>> digits;
  };
  topo_id current_;
  topo_id planned_;
  std::map<std::pair<std::string, uint64_t>, ready> ready_;
};

} // namespace loom
