#include "generation/types.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace loom {

parallel_config parallel_config::expert_parallel(int ep, int attention_tp) {
  parallel_config c{attention_tp};
  c.ep = ep;
  return c;
}

parallel_config parallel_config::disaggregated(int attention_gpus, int ffn_gpus) {
  parallel_config c{attention_gpus};
  c.ffn_gpus = ffn_gpus;
  return c;
}

int parallel_config::gpus() const {
  if (is_afd())
    return tp + ffn_gpus;
  return std::max(tp, ep);
}

std::string parallel_config::name() const {
  if (is_afd())
    return fmt::format("AFD{}:{}", tp, ffn_gpus);
  if (is_ep())
    return fmt::format("EP{}/TP{}", ep, tp);
  return fmt::format("TP{}", tp);
}

std::string gen_deployment::name() const {
  return std::to_string(instances) + "x" + parallel.name();
}

} // namespace loom
