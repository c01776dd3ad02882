#include "generation/model_catalog.hpp"

#include <algorithm>
#include <cmath>

#include "types/catalog.hpp"

namespace loom {

const std::vector<model_spec>& builtin_models() {
  // name, total, active, d_model, layers, ffn, experts, q, kv, head_dim, dtype, vocab, top-k
  static const std::vector<model_spec> models{
    {"Qwen2.5-14B", 14.7e9, 14.7e9, 5120, 48, 13824, 0, 40, 8, 128, 2, 152064, 0},
    {"Qwen2.5-32B", 32.5e9, 32.5e9, 5120, 64, 27648, 0, 40, 8, 128, 2, 152064, 0},
    {"Qwen2-57B-A14B", 57.41e9, 14e9, 3584, 28, 2560, 64, 28, 4, 128, 2, 151936, 8},
    {"Qwen2.5-72B", 72.7e9, 72.7e9, 8192, 80, 29568, 0, 64, 8, 128, 2, 152064, 0},
    {"Qwen3-235B-A22B", 235e9, 22e9, 4096, 94, 1536, 128, 64, 4, 128, 2, 151936, 8},
  };
  return models;
}

double model_spec::ffn_read_fraction(int batch) const {
  if (!moe() || batch <= 0)
    return batch > 0 ? 1.0 : 0.0;
  // The active share of the FFN for one token, then the chance an expert is missed by all.
  const double per_token = std::clamp(active_ffn_params() / ffn_params(), 0.0, 1.0);
  return 1.0 - std::pow(1.0 - per_token, batch);
}

std::optional<model_spec> find_model(std::string_view name) {
  return find_by_name(builtin_models(), name);
}

} // namespace loom
