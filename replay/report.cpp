#include "replay/report.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "core/error.hpp"

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

caf::expected<std::unique_ptr<database>> open_scratch_store(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::storage_failure, fmt::format("cannot create {}: {}", dir, ec.message()));
  return database::open(dir);
}

caf::error write_report_files(const std::string& dir, const std::string& report_json,
                              const std::string& timings_json) {
  for (auto [file, text] : {std::pair{"report.json", &report_json},
                            std::pair{"timings.json", &timings_json}}) {
    std::ofstream f{std::filesystem::path{dir} / file, std::ios::binary};
    f << *text;
    if (!f)
      return make_error(errc::storage_failure, fmt::format("cannot write {}/{}", dir, file));
  }
  return {};
}

} // namespace loom::replay
