#include "replay/html_report.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "replay/report_figures.hpp"

namespace loom::replay {

namespace {

using ojson = nlohmann::ordered_json;

/// Rows are policies, columns their numeric fields in the order the report gives them.
ojson policy_table(const ojson& report) {
  ojson columns = ojson::array(), rows = ojson::array();
  if (!report.contains("policies") || !report["policies"].is_object())
    return nullptr;
  for (auto& [name, p] : report["policies"].items())
    for (auto& [key, v] : p.items())
      if (v.is_number() && std::find(columns.begin(), columns.end(), key) == columns.end())
        columns.push_back(key);
  for (auto& [name, p] : report["policies"].items()) {
    ojson row = ojson::array({name});
    for (auto& c : columns) {
      auto key = c.get<std::string>();
      row.push_back(p.contains(key) && p[key].is_number() ? p[key] : ojson());
    }
    rows.push_back(row);
  }
  columns.insert(columns.begin(), "policy");
  return {{"columns", columns}, {"rows", rows}};
}

} // namespace

std::string run_label(const std::string& where) {
  namespace fs = std::filesystem;
  fs::path p{where};
  if (!fs::is_directory(p))
    p = p.parent_path();
  p = fs::weakly_canonical(fs::absolute(p));
  return p.filename().empty() ? where : p.filename().string();
}

std::string comparison_warning(const std::vector<report_run>& runs) {
  std::vector<std::string> kinds;
  for (auto& r : runs) {
    auto k = report_kind(r.report);
    if (k.empty())
      k = "unknown";
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end())
      kinds.push_back(k);
  }
  if (kinds.size() < 2)
    return {};
  return fmt::format("these runs are of different kinds ({}): their numbers measure different "
                     "things and do not compare",
                     fmt::join(kinds, ", "));
}

namespace {

/// Every numeric leaf of every run by path; the rows where the runs differ come first.
ojson comparison(const std::vector<report_run>& runs) {
  std::map<std::string, std::vector<ojson>> values;
  std::vector<std::string> order;
  for (size_t i = 0; i < runs.size(); ++i)
    for (auto& [path, v] : scalars_of(runs[i].report)) {
      auto [it, fresh] = values.try_emplace(path, std::vector<ojson>(runs.size()));
      if (fresh)
        order.push_back(path);
      it->second[i] = v;
    }
  ojson differ = ojson::array(), same = ojson::array();
  for (auto& path : order) {
    auto& v = values[path];
    bool equal = std::all_of(v.begin(), v.end(), [&](const ojson& x) { return x == v.front(); });
    ojson row = ojson::array({path});
    for (auto& x : v)
      row.push_back(x);
    (equal ? same : differ).push_back(row);
  }
  ojson labels = ojson::array();
  for (auto& r : runs)
    labels.push_back(r.label);
  ojson out{{"runs", labels}, {"differ", differ}, {"same", same}};
  if (auto warning = comparison_warning(runs); !warning.empty())
    out["warning"] = warning;
  return out;
}

void replace_once(std::string& text, std::string_view marker, std::string_view with) {
  auto at = text.find(marker);
  if (at != std::string::npos)
    text.replace(at, marker.size(), with);
}

} // namespace

std::string render_html_report(const std::vector<report_run>& runs) {
  ojson page;
  page["runs"] = ojson::array();
  for (auto& r : runs)
    page["runs"].push_back({{"label", r.label},
                            {"scenario", r.report.value("scenario", std::string{})},
                            {"seed", r.report.contains("seed") ? r.report["seed"] : ojson()},
                            {"verdict", verdict_of(r.report)},
                            {"table", policy_table(r.report)},
                            {"figures", figures_of(r.report)}});
  page["comparison"] = runs.size() > 1 ? comparison(runs) : ojson();
  // Inside <script>, "</" would end the element early.
  std::string data = page.dump(-1, ' ', false, ojson::error_handler_t::replace);
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3))
    data.replace(at, 2, "<\\/");
  std::string html{report_page_text()};
  replace_once(html, "/*LOOM_CHART_JS*/", chart_js_text());
  replace_once(html, "{/*LOOM_DATA*/}", data);
  return html;
}

} // namespace loom::replay
