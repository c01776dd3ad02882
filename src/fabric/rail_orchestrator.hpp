#pragma once
// Opus's rail orchestration for one job (Opus §4.1-4.2), pure: the controller's topo_write
// barrier (opus_controller), then one transition at a time on the job's rails. A transition's
// writers are acknowledged only once its sub-mappings are applied (G1); a write that changes
// nothing (O1) is acknowledged at once unless a pending transition reprograms one of its
// stages, in which case it waits for that one. An apply that fails is retried; after the
// retries the rails fall back to a static giant ring that serves every operation, and every
// writer is acknowledged with the fallback. The controller actor (live) and the Opus step
// simulation (replay) both run this; G2 (no reprogramming under an operation in flight) is a
// predicate the caller supplies.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "fabric/opus_controller.hpp"
#include "fabric/topo_id.hpp"
#include "types/common.hpp"
#include "types/fabric.hpp"

namespace loom {

/// Writers (the caller's tokens) to acknowledge together, and with what.
struct rail_acks {
  std::vector<uint64_t> writers;
  topo_ack ack;
};

struct rail_write_outcome {
  std::optional<topo_transition> transition; // the group's barrier completed with this
  std::vector<rail_acks> acks;               // writers to acknowledge now
};

struct rail_apply_outcome {
  std::vector<rail_acks> acks; // in transition order
  bool retry = false;          // the apply failed and is to be tried again (start() again)
  bool fell_back = false;      // the retries are spent: the rails go to the giant ring now
  int attempts = 0;            // of the transition that finished
};

class rail_orchestrator {
public:
  /// Rank r is on port `first_port + r` of every rail (Opus §7: jobs share rails on disjoint
  /// ports).
  rail_orchestrator(opus_layout layout, topo_id initial, int max_retries,
                    uint32_t first_port = 1);

  /// A rank's topo_write; `writer` is the caller's token for its answer.
  rail_write_outcome write(const topo_write& w, uint64_t writer);

  /// The transition to apply now: the queue's front, unless one is being applied or `busy`
  /// says a stage it reprograms has an operation in flight (G2).
  const topo_transition* start(const std::function<bool(int)>& busy = {});

  /// The started transition's apply has finished.
  rail_apply_outcome finish(bool ok);

  const opus_layout& layout() const { return layout_; }
  uint32_t first_port() const { return first_port_; }
  const topo_id& current() const { return barrier_.current(); }
  bool fallen_back() const { return fallen_back_; }
  bool applying() const { return applying_; }
  size_t queued() const { return queue_.size(); }

  /// The cross-connects of every stage's sub-mapping under the current topology on a rail
  /// switch of `ports` x `ports` (rank r sends on input first_port + r, receives on output
  /// ports + first_port + r).
  std::vector<cross_connect> mapping(uint32_t ports) const;
  /// What the rails carry now: the mapping, or the giant ring once fallen back.
  std::vector<cross_connect> carried(uint32_t ports) const;
  /// What a transition changes on such a rail: only the stages it reprograms.
  xc_diff diff(const topo_transition& t, uint32_t ports) const;
  /// From the current topology to the static giant ring over every rank (Opus §4.2 faults).
  xc_diff giant_ring_diff(uint32_t ports) const;

private:
  struct pending {
    topo_transition transition;
    std::vector<uint64_t> writers;
    int attempts = 0;
  };
  using group_key = std::pair<std::string, uint64_t>;

  rail_acks acks_for(std::vector<uint64_t> writers) const;
  /// An O1 transition must wait: a pending one reprograms one of its writers' stages.
  bool waits(const std::vector<int>& stages) const;
  std::vector<cross_connect> stages_mapping(const topo_id& id, const std::vector<int>& stages,
                                            uint32_t ports) const;

  opus_layout layout_;
  opus_controller barrier_;
  int max_retries_;
  uint32_t first_port_;
  std::map<group_key, std::vector<std::pair<uint64_t, int>>> writing_; // (writer, stage)
  std::deque<pending> queue_;
  bool applying_ = false;
  bool fallen_back_ = false;
};

} // namespace loom
