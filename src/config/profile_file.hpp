#pragma once
// An engine profile file (docs/scenarios.md "Engine profiles"): measured decode-step times per
// parallel config for one model on one GPU type, given as fitted coefficients or as the raw
// samples (fitted here). Scenarios and `loom serve` deployments name one with `profile`.

#include <optional>
#include <string>
#include <vector>

#include "generation/engine_profile.hpp"
#include "types/config_error.hpp"

namespace loom {

/// The profile at `path`, or nothing after appending located errors. Whether it was measured
/// for the deployment's model and GPU is the caller's check (profile_mismatch).
std::optional<engine_profile> read_engine_profile(const std::string& path,
                                                  std::vector<config_error>& errors);

/// Why `profile` does not fit a deployment of `model` on `gpu`, or nothing.
std::optional<std::string> profile_mismatch(const engine_profile& profile,
                                            const std::string& model, const std::string& gpu);

} // namespace loom
