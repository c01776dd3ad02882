#include "replay/report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "protocol/error.hpp"
#include "replay/html_report.hpp"

namespace loom::replay {

double round4(double x) {
  return std::round(x * 1e4) / 1e4;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(std::min(double(v.size() - 1), std::ceil(q * double(v.size())) - 1))];
}

caf::error make_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::invalid_argument, fmt::format("cannot create {}: {}", dir, ec.message()));
  return {};
}

std::string seed_report_dir(uint64_t seed) {
  return fmt::format("seed-{}", seed);
}

caf::expected<std::string> make_seed_dir(const std::string& out_dir, uint64_t seed) {
  auto dir = (std::filesystem::path{out_dir} / seed_report_dir(seed)).string();
  if (auto err = make_output_dir(dir))
    return err;
  return dir;
}

caf::expected<std::unique_ptr<database>> open_scratch_store(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::storage_failure, fmt::format("cannot create {}: {}", dir, ec.message()));
  return database::open(dir);
}

caf::error write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f{path, std::ios::binary};
  f << text;
  f.close();
  if (!f)
    return make_error(errc::storage_failure, fmt::format("cannot write {}", path));
  return {};
}

caf::error write_report_files(const std::string& dir, const std::string& report_json,
                              const std::string& timings_json) {
  // report.html is drawn from report.json's own text: `loom report DIR` redraws the same page.
  auto report = nlohmann::ordered_json::parse(report_json, nullptr, false);
  if (report.is_discarded())
    return make_error(errc::invalid_argument, "report.json is not JSON");
  const std::string html = render_html_report({{run_label(dir), std::move(report)}});
  const std::filesystem::path d{dir};
  for (auto [file, text] : {std::pair{"report.json", &report_json},
                            std::pair{"timings.json", &timings_json},
                            std::pair{"report.html", &html}})
    if (auto err = write_text_file((d / file).string(), *text))
      return err;
  return {};
}

} // namespace loom::replay
