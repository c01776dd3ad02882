// `loom report` (redraw or compare replay reports) and `loom events` (a store's event log).

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "app/commands.hpp"
#include "protocol/error.hpp"
#include "records/codecs.hpp"
#include "replay/html_report.hpp"
#include "replay/report.hpp"
#include "store/database.hpp"

namespace loom {

namespace {

namespace fs = std::filesystem;

/// DIR/report.json (or the file itself), parsed; nothing after printing why not.
std::optional<nlohmann::ordered_json> read_report(const std::string& where) {
  fs::path path = fs::is_directory(where) ? fs::path{where} / "report.json" : fs::path{where};
  std::ifstream f{path, std::ios::binary};
  if (!f) {
    std::fprintf(stderr, "%s: cannot open (give a replay's output directory or its "
                         "report.json)\n", path.c_str());
    return std::nullopt;
  }
  std::stringstream text;
  text << f.rdbuf();
  auto report = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  if (report.is_discarded() || !report.is_object()) {
    std::fprintf(stderr, "%s: not a replay report (not a JSON object)\n", path.c_str());
    return std::nullopt;
  }
  return report;
}

class report_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "report", "Draw replay reports as HTML from their report.json. One DIR: rewrites\n"
                "DIR/report.html. Several: one page comparing them (the numbers that differ\n"
                "first, then each run's figures), written to --out.");
    cmd_->add_option("dirs", dirs_, "Replay output directories (or report.json files)")
      ->required();
    cmd_->add_option("--out", out_, "Output file; default DIR/report.html for one run, "
                                    "compare.html for several");
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    std::vector<replay::report_run> runs;
    for (auto& d : dirs_) {
      auto report = read_report(d);
      if (!report)
        return exit_config_error;
      runs.push_back({replay::run_label(d), std::move(*report)});
    }
    std::map<std::string, int> named;
    for (auto& r : runs)
      ++named[r.label];
    for (size_t i = 0; i < runs.size(); ++i) // two runs named alike keep their paths
      if (named[runs[i].label] > 1)
        runs[i].label = dirs_[i];
    if (auto warning = replay::comparison_warning(runs); !warning.empty())
      std::fprintf(stderr, "warning: %s\n", warning.c_str());
    std::string out = out_;
    if (out.empty())
      out = dirs_.size() == 1 && fs::is_directory(dirs_[0])
              ? (fs::path{dirs_[0]} / "report.html").string()
              : std::string{"compare.html"};
    if (auto err = replay::write_text_file(out, replay::render_html_report(runs))) {
      std::fprintf(stderr, "%s\n", render(err).c_str());
      return 1;
    }
    std::printf("%s\n", out.c_str());
    return 0;
  }

private:
  CLI::App* cmd_ = nullptr;
  std::vector<std::string> dirs_;
  std::string out_;
};

// 2001-09-09: no replay spans 31 years, and a serve's log is later than that.
constexpr int64_t wall_clock_floor_ns = 1'000'000'000'000'000'000;

std::string utc_text(int64_t ns) {
  const std::time_t s = std::time_t(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:06}Z", text, (ns % 1'000'000'000) / 1000);
}

/// An event's logfmt detail (`key=value key="quoted \"value\""`) as a JSON object, numbers
/// as numbers; the text itself where it is not logfmt.
nlohmann::ordered_json detail_json(const std::string& text) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  size_t i = 0;
  auto skip_spaces = [&] {
    while (i < text.size() && text[i] == ' ')
      ++i;
  };
  for (skip_spaces(); i < text.size(); skip_spaces()) {
    const size_t eq = text.find('=', i);
    if (eq == std::string::npos || eq == i || text.find(' ', i) < eq)
      return text;
    std::string key = text.substr(i, eq - i), value;
    i = eq + 1;
    if (i < text.size() && text[i] == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i)
        value += text[i] == '\\' && i + 1 < text.size() ? text[++i] : text[i];
      if (i++ >= text.size())
        return text; // unterminated quote
      out[key] = value;
      continue;
    }
    const size_t end = std::min(text.find(' ', i), text.size());
    value = text.substr(i, end - i);
    i = end;
    char* parsed = nullptr;
    const double number = std::strtod(value.c_str(), &parsed);
    const bool decimal = !value.empty() && value.find_first_not_of("0123456789.-+eE") == value.npos
                         && (std::isdigit(static_cast<unsigned char>(value[0])) || value[0] == '-');
    if (decimal && parsed == value.c_str() + value.size())
      out[key] = number;
    else
      out[key] = value;
  }
  return out;
}

class events_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "events", "Print a store's event log as JSON lines (seq, time_ns and time (a serve's,\n"
                "UTC) or sim_s (a replay's), kind, subject, detail as an object): a replay's\n"
                "DIR/store/POLICY or a serve's [storage] path, also while that serve runs\n"
                "(read-only: what was durable when it was opened).");
    cmd_->add_option("store", path_, "Store directory")->required();
    cmd_->add_option("--from", from_, "First sequence number")->capture_default_str();
    cmd_->add_option("--limit", limit_, "At most this many events (0: all)")
      ->capture_default_str();
  }

  std::optional<int> run_if_given() override {
    if (!*cmd_)
      return std::nullopt;
    auto db = database::open_read_only(path_);
    if (!db) {
      std::fprintf(stderr, "%s\n", render(db.error()).c_str());
      return exit_config_error;
    }
    constexpr size_t page = 4096;
    uint64_t next = from_;
    for (uint64_t printed = 0; limit_ == 0 || printed < limit_;) {
      auto batch = (*db)->read_events(next, page);
      if (!batch) {
        std::fprintf(stderr, "%s\n", render(batch.error()).c_str());
        return 1;
      }
      for (auto& r : *batch) {
        if (limit_ != 0 && printed == limit_)
          break;
        print(r);
        ++printed;
        next = event_seq(r.key) + 1;
      }
      if (batch->size() < page)
        break;
    }
    return 0;
  }

private:
  static void print(const stored_record& r) {
    nlohmann::ordered_json line{{"seq", event_seq(r.key)}};
    if (auto e = decode_event(r.value)) {
      line["time_ns"] = e->time_ns;
      // A serve's log has wall-clock times; a replay's, simulated ones from its start.
      if (e->time_ns >= wall_clock_floor_ns)
        line["time"] = utc_text(e->time_ns);
      else
        line["sim_s"] = double(e->time_ns) / 1e9;
      line["kind"] = to_string(e->event.kind);
      line["subject"] = e->event.subject;
      line["detail"] = detail_json(e->event.detail);
    } else {
      line["kind"] = "unknown"; // written by a newer loom
    }
    std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  }

  CLI::App* cmd_ = nullptr;
  std::string path_;
  uint64_t from_ = 0;
  uint64_t limit_ = 0;
};

} // namespace

std::unique_ptr<subcommand> report_subcommand() {
  return std::make_unique<report_command>();
}

std::unique_ptr<subcommand> events_subcommand() {
  return std::make_unique<events_command>();
}

} // namespace loom
