#pragma once
// Stage-aware topology templates (RFabric §5.2, Fig. 8), pure. A template decides which pairs
// are OCS-eligible (App. D ELIGIBLE(tpl, u, v)) and what core budget each PoD may use:
//   train fwd/bwd  high-bisection intra-PoD fabric, a core slice for the rare PP hop;
//   grad-sync      the same plus a high-bisection inter-PoD mesh over every boundary port;
//   gen            isolated intra-PoD fabrics and a small core slice per PoD;
//   weight-sync    the dissemination forest's edges (App. E) on core and Agg.
// Phase 1 of §5.3 caches the template (and so the allocation procedure it parameterises) per
// recurring intent; phase 2 instantiates it against each period's demand.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fabric/demand.hpp"
#include "fabric/fabric_model.hpp"

namespace loom {

struct stage_template {
  fabric_stage stage = fabric_stage::train_compute;
  std::vector<bool> pods;    // PoDs the intent's members live in
  bool tor_to_tor = true;    // OCS-Agg ToR-ToR circuits inside those PoDs
  // All-to-all, M2N and broadcast mixes: one circuit per edge of a ring over the PoD's
  // demanding ToRs before Alg. 3 runs. The greedy's infinite rule serves equal demands in pair order, which with
  // fewer uplinks than peers closes ToRs into cliques that cannot reach each other.
  bool backbone_ring = false;
  bool core = true;          // OCS-Core circuits between those PoDs
  uint32_t core_slice = 0;   // at most this many core circuits per PoD; 0 = every boundary port

  bool spans(uint32_t pod) const { return pod < pods.size() && pods[pod]; }
  bool core_eligible(uint32_t a, uint32_t b) const { return core && spans(a) && spans(b); }
};

struct template_options {
  uint32_t gen_core_slice = 1;   // §5.2: enough to stream responses back to the Train PoDs
  uint32_t train_core_slice = 2; // fwd/bwd is mostly intra-PoD; grad-sync gets the mesh
};

/// The §5.2 template for an intent on this fabric.
stage_template select_template(const fabric_model& model, const fabric_intent& intent,
                                  const template_options& options = {});

/// Phase 1 cache, keyed by fabric_intent::signature().
class template_cache {
public:
  explicit template_cache(template_options options = {}) : options_(options) {}

  /// The cached template of a recurring intent, selecting it on first sight.
  const stage_template& get(const fabric_model& model, const fabric_intent& intent);
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  void clear() { cache_.clear(); }

private:
  template_options options_;
  std::map<std::string, stage_template> cache_;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

} // namespace loom
