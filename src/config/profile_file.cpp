#include "config/profile_file.hpp"

#include <fmt/format.h>

#include "config/toml_reader.hpp"

namespace loom {

namespace {

/// The decode line of one [[config]]: its coefficients, or the least-squares fit of its
/// samples (batch, context_tokens and step_ms, equally long).
std::optional<step_line> read_decode(table_reader& c) {
  auto batch = c.optional<std::vector<double>>("batch", {});
  auto context = c.optional<std::vector<double>>("context_tokens", {});
  auto step = c.optional<std::vector<double>>("step_ms", {});
  if (!batch || !context || !step)
    return std::nullopt;
  if (!step->empty()) {
    if (batch->size() != step->size() || context->size() != step->size()) {
      c.error("step_ms", fmt::format("has {} samples but batch has {} and context_tokens {}",
                                     step->size(), batch->size(), context->size()));
      return std::nullopt;
    }
    std::vector<step_sample> samples;
    for (size_t i = 0; i < step->size(); ++i)
      samples.push_back({(*batch)[i], (*context)[i], (*step)[i]});
    auto line = fit_step_line(samples);
    if (!line)
      c.error("step_ms", "the samples do not determine a step time: give at least three, "
                         "varying batch and context independently");
    return line;
  }
  step_line line;
  if (auto v = non_negative(c, "fixed_ms", c.required<double>("fixed_ms")))
    line.fixed_ms = *v;
  if (auto v = non_negative(c, "per_request_ms", c.required<double>("per_request_ms")))
    line.per_request_ms = *v;
  if (auto v = non_negative(c, "per_kilotoken_ms", c.required<double>("per_kilotoken_ms")))
    line.per_kilotoken_ms = *v;
  return line;
}

std::optional<profiled_config> read_config(table_reader& c) {
  profiled_config out;
  bool ok = true;
  if (auto v = c.required<std::string>("parallel")) {
    if (auto p = parallel_config::parse(*v))
      out.parallel = *p;
    else {
      c.error("parallel", fmt::format("'{}' is not a parallel config (TP4, EP16/TP2, AFD4:4)",
                                      *v));
      ok = false;
    }
  }
  auto decode = read_decode(c);
  if (auto v = non_negative(c, "prefill_tokens_per_s",
                            c.optional<double>("prefill_tokens_per_s", 0.0)))
    out.prefill_tokens_per_s = *v;
  if (auto v = at_least<int64_t>(c, "kv_tokens", c.optional<int64_t>("kv_tokens", 0), 0))
    out.kv_tokens = *v;
  c.reject_unknown();
  if (!decode || !ok)
    return std::nullopt;
  out.decode = *decode;
  return out;
}

} // namespace

std::optional<engine_profile> read_engine_profile(const std::string& path,
                                                  std::vector<config_error>& errors) {
  auto text = read_text_file(path, errors);
  if (!text)
    return std::nullopt;
  auto doc = parse_toml(*text, path, errors);
  if (!doc)
    return std::nullopt;
  config_diagnostics diag{path};
  table_reader root{*doc, "", diag};
  engine_profile p;
  if (auto head = root.required_table("profile")) {
    if (auto v = head->required<std::string>("model"))
      p.model = *v;
    if (auto v = head->required<std::string>("gpu"))
      p.gpu = *v;
    if (auto v = head->optional<std::string>("source", ""))
      p.source = *v;
    head->reject_unknown();
  }
  for (auto& c : root.table_array("config"))
    if (auto config = read_config(c)) {
      if (p.find(config->parallel))
        c.error("parallel", fmt::format("{} is profiled twice", config->parallel.name()));
      else
        p.configs.push_back(*config);
    }
  if (p.configs.empty() && diag.errors().empty())
    root.error("config", "profiles no parallel config: add at least one [[config]]");
  root.reject_unknown();
  auto found = diag.take_errors();
  if (!found.empty()) {
    errors.insert(errors.end(), found.begin(), found.end());
    return std::nullopt;
  }
  return p;
}

std::optional<std::string> profile_mismatch(const engine_profile& profile,
                                            const std::string& model, const std::string& gpu) {
  if (profile.model != model || profile.gpu != gpu)
    return fmt::format("profiles {} on {}, not {} on {}", profile.model, profile.gpu, model, gpu);
  return std::nullopt;
}

} // namespace loom
