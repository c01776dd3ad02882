// `loom report` (redraw or compare replay reports) and `loom events` (a store's event log).

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/commands.hpp"
#include "core/error.hpp"
#include "replay/html_report.hpp"
#include "replay/report.hpp"
#include "store/codecs.hpp"
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
      runs.push_back({d, std::move(*report)});
    }
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

class events_command : public subcommand {
public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
      "events", "Print a store's event log as JSON lines (seq, time_ns, kind, subject,\n"
                "detail): a replay's DIR/store/POLICY or a serve's [storage] path, also while\n"
                "that serve runs (read-only: what was durable when it was opened).");
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
      line["kind"] = to_string(e->event.kind);
      line["subject"] = e->event.subject;
      line["detail"] = e->event.detail;
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
