#pragma once
// The whole message protocol of a Loom process, on one page: every atom and every typed actor
// interface. Actors implement these in their own components; nothing else declares one.

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "store/records.hpp"

namespace loom {

// -- atoms (CAF 0.17: at most 10 characters) -----------------------------------------------

using write_atom = caf::atom_constant<caf::atom("write")>;
using scan_atom = caf::atom_constant<caf::atom("scan")>;
using events_atom = caf::atom_constant<caf::atom("events")>;
using caf::flush_atom;
using caf::get_atom;
using caf::ok_atom;

// -- store -----------------------------------------------------------------------------------

/// Persistence of all state (RocksDB). A write is answered only after it is durable when the
/// batch asks for sync, so a decision acknowledged to anyone survives a crash.
using store_actor = caf::typed_actor<
  // Atomically applies the batch; answers the event-log sequence after the write.
  caf::replies_to<write_atom, write_batch>::with<uint64_t>,
  // Reads one record; a missing key is an errc::not_found error.
  caf::replies_to<get_atom, record_kind, std::string>::with<std::string>,
  // All records of a kind whose key starts with the prefix, in key order.
  caf::replies_to<scan_atom, record_kind, std::string>::with<std::vector<stored_record>>,
  // Events from a sequence number on, at most `limit` of them.
  caf::replies_to<events_atom, uint64_t, uint64_t>::with<std::vector<stored_record>>,
  // Syncs the WAL so that every write so far is durable.
  caf::replies_to<flush_atom>::with<ok_atom>>;

} // namespace loom
