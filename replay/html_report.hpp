#pragma once
// report.html: one self-contained page drawn from report.json (the chart library, Debian's
// Chart.js, is inlined: nothing is fetched when it is viewed). One run, or several compared.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::replay {

/// Debian's Chart.js and replay/report_page.html, compiled in (scripts/embed_text.py).
std::string_view chart_js_text();
std::string_view report_page_text();

struct report_run {
  std::string label; // e.g. the run's directory
  nlohmann::ordered_json report;
};

/// A run's name on its page: the name of its directory (given, or the report.json's), not the
/// path it has on this machine.
std::string run_label(const std::string& where);

/// The page for one run, or for several side by side with the numbers that differ first.
std::string render_html_report(const std::vector<report_run>& runs);

/// Why the runs do not compare (a WEAVE run beside a generation run), or empty.
std::string comparison_warning(const std::vector<report_run>& runs);

} // namespace loom::replay
