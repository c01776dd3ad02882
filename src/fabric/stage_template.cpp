#include "fabric/stage_template.hpp"

namespace loom {

stage_template select_template(const fabric_model& model, const fabric_intent& intent,
                                  const template_options& options) {
  stage_template t;
  t.stage = intent.stage;
  t.pods.assign(model.pods.size(), false);
  for (auto& r : intent.members)
    if (r.server < model.servers.size())
      t.pods[model.pod_of(r)] = true;
  // A ring backbone where demand fans out over many ToR pairs (all-to-all, M2N, broadcast
  // trees): a ring all-reduce's demand is already a chain of ToR pairs, and the backbone would
  // take its ports.
  t.backbone_ring = false;
  for (auto& m : intent.mix)
    if (m.kind == primitive::all_to_all || m.kind == primitive::m2n
        || m.kind == primitive::broadcast)
      t.backbone_ring = true;
  switch (intent.stage) {
    case fabric_stage::train_compute:
      t.core_slice = options.train_core_slice;
      break;
    case fabric_stage::train_grad_sync:
    case fabric_stage::weight_sync:
      break;
    case fabric_stage::gen:
      t.core_slice = options.gen_core_slice;
      break;
  }
  return t;
}

const stage_template& template_cache::get(const fabric_model& model,
                                             const fabric_intent& intent) {
  auto key = intent.signature();
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  return cache_.emplace(key, select_template(model, intent, options_)).first->second;
}

} // namespace loom
