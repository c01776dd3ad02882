#include "generation/gen_restore.hpp"

#include <optional>

#include <caf/all.hpp>
#include <fmt/format.h>

#include "protocol/ask_now.hpp"
#include "protocol/error.hpp"
#include "records/gen_codecs.hpp"

namespace loom {

namespace {

/// A record the store may not have: nothing when it is missing, an error when unreadable.
caf::expected<std::optional<std::string>> stored(caf::actor_system& sys, const store_actor& store,
                                                 record_kind kind, const std::string& key) {
  auto got = ask_now<std::string>(sys, store, get_atom::value, kind, key);
  if (got)
    return std::optional<std::string>{std::move(*got)};
  if (code_of(got.error()) == errc::not_found)
    return std::optional<std::string>{};
  return got.error();
}

} // namespace

caf::expected<deployment_restored> restore_deployment(caf::actor_system& sys,
                                                      const store_actor& store,
                                                      const std::string& name) {
  deployment_restored restored;
  auto& out = restored.controller;
  auto unreadable = [&](const char* what) {
    return make_error(errc::storage_corrupted,
                      fmt::format("deployment '{}': its {} record does not decode", name, what));
  };
  auto record = stored(sys, store, record_kind::gen_deployments, name);
  if (!record)
    return record.error();
  if (*record) {
    out.record = decode_gen_deployment(**record);
    if (!out.record)
      return unreadable("controller");
  }
  if (out.record && out.record->step_active) {
    auto key = gen_step_key(name, out.record->step);
    auto batch = stored(sys, store, record_kind::gen_steps, key);
    if (!batch)
      return batch.error();
    if (*batch && !(out.step = decode_gen_step(**batch)))
      return unreadable("step");
    auto done = ask_now<std::vector<stored_record>>(sys, store, scan_atom::value,
                                                    record_kind::gen_steps, key + "/");
    if (!done)
      return done.error();
    for (auto& r : *done)
      if (auto d = decode_request_done(r.value))
        out.finished.push_back(*d);
  }
  auto forecast = stored(sys, store, record_kind::gen_forecasts, name);
  if (!forecast)
    return forecast.error();
  if (*forecast) {
    auto h = decode_gen_forecast(**forecast);
    if (!h)
      return unreadable("forecast");
    restored.forecast = std::move(*h);
  }
  return restored;
}

} // namespace loom
