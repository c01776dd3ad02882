#pragma once
// Loom's error codes, carried across actor boundaries as caf::error in category "loom".

#include <caf/error.hpp>
#include <caf/fwd.hpp>

#include <cstdint>
#include <string>

namespace loom {

enum class errc : uint8_t {
  ok = 0,
  invalid_config,     // a config file failed validation
  invalid_argument,   // a request carried a value outside its domain
  not_found,          // a looked-up record does not exist
  storage_failure,    // RocksDB reported an I/O error or refused a write
  storage_full,       // the database's file system has no space left
  storage_read_only,  // the store refuses writes until its disk recovers (nothing was stored)
  storage_corrupted,  // the database failed a consistency check
  storage_locked,     // another process holds the database lock
  schema_too_new,     // the database was written by a newer schema than this binary knows
  driver_refused,     // an OCS diff violates the cross-connect model; nothing was sent
  driver_denied,      // the OCS device answered DENY
  driver_timeout,     // the OCS device did not answer in time
  driver_unreachable, // no connection to the OCS device
  driver_auth,        // the OCS device refused the login
  driver_protocol,    // the peer does not speak the expected protocol
  job_ended,          // the job finished, failed, was cancelled or rejected
  already_exists,     // a job of that name is placed or being placed
  out_of_turn,        // a report or request for a phase the job is not at (e.g. after a
                      // restart, which resumes jobs at the start of their iteration)
  unavailable,        // nothing can serve it now (e.g. a deployment with no engine)
  conflict,           // it contradicts what runs (e.g. a new step while one runs)
  not_leader,         // [ha]: this replica does not lead (its lease ended, or it stood down);
                      // nothing was stored: the leader takes it
};

const char* to_string(errc x);

/// The CAF error category atom for errc values.
caf::atom_value error_category();

caf::error make_error(errc code, std::string message);

/// "code: message" for an error of the loom category (the CAF error renderer).
std::string render_loom_error(uint8_t code, const caf::message& context);

/// Renders an error of any category as "category: code: message" for logs and CLI output.
std::string render(const caf::error& err);

/// The loom code of an error (ok for another category) and its message alone.
errc code_of(const caf::error& err);
std::string message_of(const caf::error& err);

} // namespace loom
