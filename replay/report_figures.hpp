#pragma once
// The figures a replay report draws, read from report.json alone (so `loom report` can redraw
// any run): WEAVE cost, pools, SLOs and a group's Gantt; generation curves, configurations and
// makespans; fabric circuits, Fig. 23, Opus timelines, beside the paper's numbers where the
// scenario names them. Each is a plain spec the page (report_page.html) turns into a chart.

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::replay {

/// [{title, type: line|step|bar|stacked|scatter|gantt, x, y, note?, ...data}], see the page.
nlohmann::ordered_json figures_of(const nlohmann::ordered_json& report);

/// "weave", "generation" or "fabric" (empty: none of them): what its numbers measure.
std::string report_kind(const nlohmann::ordered_json& report);

/// One sentence: which policy wins and by how much; empty when the report ranks no policies.
std::string verdict_of(const nlohmann::ordered_json& report);

/// The report's numeric leaves by path ("policies.weave.cost_per_hour_avg"), figures and
/// per-item lists left out: what two runs are compared on.
std::vector<std::pair<std::string, double>> scalars_of(const nlohmann::ordered_json& report);

} // namespace loom::replay
