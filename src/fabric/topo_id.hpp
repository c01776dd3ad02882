#pragma once
// Opus per-rail topology identifiers (Opus §4.1-4.2), pure. A job's topo_id has one decimal
// digit per stage of its asymmetrical parallelism (PP): 0 means the stage's ports serve PP
// Send/Recv, 1..9 mean symmetrical parallelism 1..9 (DP, CP, EP, ...) owns them. The rail's
// mapping is decomposed into one sub-mapping per stage, so a transition reprograms only the
// stages whose digit changed, plus the PP peers of a stage that leaves PP.
//
// Layout: rank = stage * ranks_per_stage + (c_1 * ... ) with the last symmetrical coordinate
// fastest; rank r sends on OCS input port r + 1 and receives on output port R + r + 1 of an
// R x R rail switch (R ranks). Sub-mappings build a ring per group (Opus Fig. 8).

#include <cstdint>
#include <string>
#include <vector>

#include "types/common.hpp"

namespace loom {

struct opus_layout {
  int pp = 1;                    // stages of the asymmetrical parallelism
  std::vector<int> symmetrical;  // degrees of digits 1, 2, ... (e.g. DP, CP)

  int ranks_per_stage() const;
  int ranks() const { return pp * ranks_per_stage(); }
  /// Coordinates of a rank within its stage, one per symmetrical dimension.
  std::vector<int> coordinates(int rank_in_stage) const;
  int rank_of(int stage, const std::vector<int>& coords) const;
};

class topo_id {
public:
  /// Every stage owned by `digit`.
  static topo_id uniform(int stages, uint8_t digit);
  /// Parses a digit string such as "001" (stage 0 first).
  static topo_id parse(const std::string& digits);

  uint8_t digit(int stage) const { return digits_[size_t(stage)]; }
  void set(int stage, uint8_t digit) { digits_[size_t(stage)] = digit; }
  int stages() const { return int(digits_.size()); }
  /// The decimal form, stage 0 the most significant digit, e.g. "001".
  std::string str() const;
  uint64_t value() const;

  friend bool operator==(const topo_id&, const topo_id&) = default;

private:
  std::vector<uint8_t> digits_;
};

/// The stage a PP-owned stage sends to: contiguous PP stages form one ring (stage s to s + 1,
/// the last back to the first), so every port is used once; -1 for a PP stage on its own.
int pp_peer(const topo_id& id, int stage);

/// Stages whose sub-mappings a transition must reprogram (Opus reconfiguration dispatch): the
/// changed digits, and PP stages whose ring successor changed (the stages previously connected
/// to a stage that left or joined PP); empty for no change (O1).
std::vector<int> stages_to_reprogram(const topo_id& from, const topo_id& to);

/// The cross-connects of one stage's sub-mapping under `id`: a ring per group of the owning
/// symmetrical dimension, or each rank to its counterpart in the stage's PP ring successor.
std::vector<cross_connect> submapping(const opus_layout& layout, const topo_id& id, int stage);

} // namespace loom
