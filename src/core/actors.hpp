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

#include "core/cross_connect.hpp"
#include "store/records.hpp"

namespace loom {

// -- atoms (CAF 0.17: at most 10 characters) -----------------------------------------------

using write_atom = caf::atom_constant<caf::atom("write")>;
using scan_atom = caf::atom_constant<caf::atom("scan")>;
using events_atom = caf::atom_constant<caf::atom("events")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using health_atom = caf::atom_constant<caf::atom("health")>;
using fault_atom = caf::atom_constant<caf::atom("fault")>;
using commit_atom = caf::atom_constant<caf::atom("commit")>;
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

// -- OCS drivers (Opus §4.3: one vendor-neutral interface over TL1, emulation, agents) -------

/// One actor per OCS device. A diff that breaks the cross-connect model (port range, masked
/// port, port used twice, port busy, unknown cross-connect) is refused with driver_refused
/// before anything reaches the device; untouched cross-connects are never disturbed.
using ocs_driver_actor = caf::typed_actor<
  // Applies removes then adds as one operation; answers what it cost.
  caf::replies_to<apply_atom, xc_diff>::with<apply_report>,
  // Reads back the device's cross-connects.
  caf::replies_to<get_atom>::with<std::vector<cross_connect>>,
  caf::replies_to<health_atom>::with<driver_health>>;

/// Faults the emulated driver injects (replay and tests).
struct ocs_fault {
  std::vector<uint32_t> failed_ports; // changes touching them are denied
  uint32_t refuse_next = 0;           // deny the next N applies
  uint32_t timeout_next = 0;          // let the next N applies time out
  double refuse_probability = 0;      // then deny / time out at random (seeded)
  double timeout_probability = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ocs_fault& x) {
  return f(caf::meta::type_name("ocs_fault"), x.failed_ports, x.refuse_next, x.timeout_next,
           x.refuse_probability, x.timeout_probability);
}

/// The in-process emulated OCS: the driver protocol plus fault injection. Its latencies run on
/// the actor clock, so replay advances them virtually.
using emulated_ocs_actor = ocs_driver_actor::extend<
  caf::replies_to<fault_atom, ocs_fault>::with<ok_atom>,
  // Internal: a reconfiguration's latency has elapsed.
  caf::reacts_to<commit_atom, uint64_t>>;

} // namespace loom
