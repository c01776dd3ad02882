#pragma once

#include <functional>
#include <optional>

#include "config/config.hpp"
#include "store/database.hpp"

namespace loom {

/// `loom serve`: opens storage, starts the metrics endpoint and the actors, runs until SIGINT or
/// SIGTERM (SIGHUP reloads the config), then stops every actor, flushes storage and returns
/// the process exit code.
/// A full disk starts it with read-only storage (writes refused until space returns).
struct serve_options {
  /// What to do with a damaged write-ahead log: refuse to start, or `--salvage`.
  wal_recovery recovery = wal_recovery::strict;
  /// Make a new server identity when the keys directory lost it (`--new-keys`).
  bool new_keys = false;
  /// The config again, read as at start (file and command-line overrides), on SIGHUP;
  /// nothing when it has errors (already printed).
  std::function<std::optional<config>()> reload;
};

int serve(const config& cfg, const serve_options& options);

} // namespace loom
