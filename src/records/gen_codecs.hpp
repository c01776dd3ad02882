#pragma once
// The generation records the store keeps, as loom.v1 bytes and back (see codecs.hpp): each
// deployment controller's record (GenDeployment), each step's batch (GenStep) and finished
// requests (RequestDone), and each planner's forecaster history (GenForecast). Pure.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "types/generation.hpp"

namespace loom {

std::string encode_gen_deployment(const std::string& name, const deployment_record& r);
std::optional<deployment_record> decode_gen_deployment(std::string_view bytes);

/// Keys of column family gen_steps: DEPLOYMENT/STEP for the batch, DEPLOYMENT/STEP/REQUEST
/// for each finished request (numbers as 16 hex digits, so keys sort by number).
std::string gen_step_key(const std::string& deployment, uint64_t step);
std::string gen_finished_key(const std::string& deployment, uint64_t step, uint64_t request);

std::string encode_gen_step(const std::string& deployment, const step_record& s);
std::optional<step_record> decode_gen_step(std::string_view bytes);

std::string encode_request_done(const request_done& d);
std::optional<request_done> decode_request_done(std::string_view bytes);

/// What the planner keeps: its forecaster's history and its prediction errors.
std::string encode_gen_forecast(const gen_forecast& f);
std::optional<gen_forecast> decode_gen_forecast(std::string_view bytes);

} // namespace loom
