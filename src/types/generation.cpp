#include "types/generation.hpp"

#include <algorithm>
#include <charconv>

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

std::optional<parallel_config> parallel_config::parse(std::string_view text) {
  auto number = [](std::string_view s, int& out) {
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc{} && ptr == s.data() + s.size() && out >= 1 && out <= 4096;
  };
  int a = 0;
  int b = 0;
  if (text.starts_with("TP") && number(text.substr(2), a))
    return parallel_config{a};
  if (text.starts_with("AFD")) {
    auto colon = text.find(':');
    if (colon != std::string_view::npos && number(text.substr(3, colon - 3), a)
        && number(text.substr(colon + 1), b))
      return disaggregated(a, b);
    return std::nullopt;
  }
  auto slash = text.find("/TP");
  if (text.starts_with("EP") && slash != std::string_view::npos
      && number(text.substr(2, slash - 2), a) && number(text.substr(slash + 3), b) && a % b == 0)
    return expert_parallel(a, b);
  return std::nullopt;
}

int gen_deployment::gpus() const {
  return instances * parallel.gpus() + latency_instances * latency.gpus();
}

std::string gen_deployment::name() const {
  auto out = std::to_string(instances) + "x" + parallel.name();
  if (mixed())
    out += "+" + std::to_string(latency_instances) + "x" + latency.name();
  return out;
}

} // namespace loom
