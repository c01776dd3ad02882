#pragma once
// The fabric_controller actor (RFabric §5.3 Alg. 2, §5.4, App. H; Opus §4.1-4.2): a thin shell
// around the pure cores. Per owner it keeps the committed plan and the intent it serves; an
// intent is materialised (materialize_intent) and committed through the OCS driver actors
// only inside a safe window (decide_commit). A commit applies the per-device diffs (untouched
// circuits stay up), writes every touched device's circuits to the store, and only then
// answers; a failed apply is rolled back on the devices that took it and the previous plan
// stays. Opus jobs run their rails through a rail_orchestrator each.

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/typed_response_promise.hpp>

#include "fabric/circuit_plan.hpp"
#include "fabric/fabric_model.hpp"
#include "fabric/rail_orchestrator.hpp"
#include "fabric/stage_template.hpp"
#include "fabric/traffic_monitor.hpp"
#include "metrics/metrics.hpp"
#include "protocol/actors.hpp"

namespace loom {

struct fabric_controller_config {
  double safe_window_margin_s = 0.005; // RFabric §5.3
  template_options templates;
  caf::timespan apply_timeout{std::chrono::seconds{5}};
  int max_retries = 2;                 // Opus: then the giant ring
  bool sync_writes = true;
  std::shared_ptr<service_metrics> metrics; // live mode: plan outcomes
  caf::timespan health_poll{0};        // App. H: every device's health and alarms; 0: never
  // Alarmed ports masked per device in any minute: a switch (or an agent) that reports every
  // port failed at once masks them no faster than this, and is reported.
  uint32_t port_masks_per_minute = 8;
};

struct fabric_controller_state {
  static inline const char* name = "fabric_controller";

  struct owner_state {
    std::optional<circuit_plan> committed;
    std::optional<fabric_intent> intent; // the one the next window serves, if not committed
    std::optional<fabric_intent> serving;
    bool busy = false;                   // a commit is in flight
  };
  /// A device as the health polls see it. One that stopped answering is down: plans touching
  /// it are kept back until it answers again and has been read back and repaired.
  struct device_state {
    bool down = false;
    bool resync = false;  // read it back before using it (at start, and after it was down)
    bool polling = false; // a health poll or a read-back is out
    std::string reason;   // why it is down
    std::deque<caf::actor_clock::time_point> masked_at; // alarm masks in the last minute
    std::optional<caf::actor_clock::time_point> limit_logged;
  };
  /// A committed decision answered once its circuits carry light (the link-up delay).
  struct link_wait {
    caf::typed_response_promise<fabric_decision> promise;
    fabric_decision decision;
  };
  struct opus_state {
    opus_job spec;               // as registered, with the newest traces (what is stored)
    std::vector<uint32_t> rails; // device indices
    std::optional<rail_orchestrator> orchestrator;
    std::map<int, std::vector<opus_phase>> phases; // by stage, learned from its trace
    std::map<uint64_t, caf::typed_response_promise<topo_ack>> answers; // by writer token
    // Asked to end: it ends once no transition is being applied (Opus §7: its ports go back).
    std::optional<caf::typed_response_promise<ok_atom>> ending;
  };

  std::optional<fabric_model> model;
  std::optional<template_cache> templates;
  std::optional<port_usage> usage;
  std::map<std::string, owner_state> owners;
  std::map<std::string, opus_state> opus;
  std::map<std::string, traffic_monitor> monitors; // mFabric §5.1, by owner
  std::map<uint32_t, ocs_driver_actor> drivers; // by device index
  std::map<uint32_t, device_state> devices;      // by device index
  std::map<uint64_t, link_wait> link_waits;
  uint64_t next_link_wait = 1;
  store_actor store;
  fabric_controller_config config;
  uint64_t next_version = 1;
  uint64_t next_writer = 1;
};

/// What a restart brings back from the store, so the controller resumes where it stood.
struct fabric_restored {
  std::vector<stored_record> plans;     // circuit_plans: each device's committed circuits
  std::vector<stored_record> opus_jobs; // opus_jobs: each Opus job and its rails' topo_id
};

/// `drivers` maps device ids to their driver actors; devices without one cannot be committed.
fabric_controller_actor::behavior_type
fabric_controller(fabric_controller_actor::stateful_pointer<fabric_controller_state> self,
                  fabric_model model, std::map<std::string, ocs_driver_actor> drivers,
                  store_actor store, fabric_controller_config config, fabric_restored restored);

} // namespace loom
