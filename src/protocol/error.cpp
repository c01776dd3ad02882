#include "protocol/error.hpp"

#include <caf/atom.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>

namespace loom {

const char* to_string(errc x) {
  switch (x) {
    case errc::ok: return "ok";
    case errc::invalid_config: return "invalid_config";
    case errc::invalid_argument: return "invalid_argument";
    case errc::not_found: return "not_found";
    case errc::storage_failure: return "storage_failure";
    case errc::storage_full: return "storage_full";
    case errc::storage_read_only: return "storage_read_only";
    case errc::storage_corrupted: return "storage_corrupted";
    case errc::storage_locked: return "storage_locked";
    case errc::schema_too_new: return "schema_too_new";
    case errc::driver_refused: return "driver_refused";
    case errc::driver_denied: return "driver_denied";
    case errc::driver_timeout: return "driver_timeout";
    case errc::driver_unreachable: return "driver_unreachable";
    case errc::driver_auth: return "driver_auth";
    case errc::driver_protocol: return "driver_protocol";
    case errc::job_ended: return "job_ended";
    case errc::already_exists: return "already_exists";
    case errc::out_of_turn: return "out_of_turn";
    case errc::unavailable: return "unavailable";
    case errc::conflict: return "conflict";
    case errc::not_leader: return "not_leader";
  }
  return "unknown";
}

caf::atom_value error_category() {
  return caf::atom("loom");
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), error_category(),
                    caf::make_message(std::move(message))};
}

std::string render_loom_error(uint8_t code, const caf::message& context) {
  std::string out = to_string(static_cast<errc>(code));
  if (!context.empty() && context.match_elements<std::string>()) {
    out += ": ";
    out += context.get_as<std::string>(0);
  }
  return out;
}

std::string render(const caf::error& err) {
  if (!err)
    return "ok";
  if (err.category() == error_category())
    return render_loom_error(err.code(), err.context());
  return caf::to_string(err);
}

errc code_of(const caf::error& err) {
  return err && err.category() == error_category() ? static_cast<errc>(err.code()) : errc::ok;
}

std::string message_of(const caf::error& err) {
  if (err.category() == error_category() && err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  return render(err);
}

} // namespace loom
