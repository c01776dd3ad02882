#pragma once
// `loom drive` for a generation scenario: the scenario's deployment played live against a
// running `loom serve`. One `loom-example-engine` process per node runs the same engine
// simulator replay uses (at wall-clock speed times time_scale) and registers with the
// service; the drive itself is the framework's router: it starts each step (StepStart), waits
// for the service's StepDone, lets the trainer's share of the RL step pass, and starts the
// next. Writes DIR/report.json in replay's schema (policy "orchestr": the service runs the
// planner and the balancer), so a live run compares with `loom replay` of the same scenario.

#include <string>

#include <caf/expected.hpp>

#include "replay/drive.hpp"
#include "replay/gen_scenario.hpp"

namespace loom::replay {

/// A service config for the scenario: a small cluster, the scenario's deployment starting
/// from `initial`, its planning period and monitoring tick divided by `time_scale` (the
/// engines run that much faster than the wall clock), and the router's and engines' keys.
std::string gen_serve_config_text(const gen_scenario& scenario, const parallel_config& initial,
                                  const std::string& storage, const std::string& gateway,
                                  const std::string& router_key_file,
                                  const std::string& engine_key_file, double time_scale);

/// The deployment the drive starts from: `--initial` if given, else static-best's (replay's
/// sweep, its stores under DIR/store).
caf::expected<parallel_config> drive_initial(const gen_scenario& scenario,
                                             const drive_options& o);

caf::expected<drive_output> run_gen_drive(const gen_scenario& scenario, const drive_options& o);

} // namespace loom::replay
