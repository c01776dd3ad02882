#include "app/process_collector.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>

#include <unistd.h>

#include <prometheus/metric_family.h>

namespace loom {

namespace {

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter)
    m.counter.value = value;
  else
    m.gauge.value = value;
  return prometheus::MetricFamily{std::move(name), std::move(help), type, {m}};
}

double boot_time_seconds() {
  std::ifstream in{"/proc/stat"};
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value)
      return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

} // namespace

std::vector<prometheus::MetricFamily> process_collector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  std::ifstream stat_file{"/proc/self/stat"};
  std::string stat;
  std::getline(stat_file, stat);
  // Fields after the parenthesised command name; see proc(5). The name may hold spaces.
  auto close = stat.rfind(')');
  if (close == std::string::npos)
    return out;
  std::istringstream fields{stat.substr(close + 2)};
  std::vector<std::string> f{std::istream_iterator<std::string>{fields}, {}};
  // f[0] is field 3 (state): field N is f[N - 3].
  if (f.size() < 22)
    return out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double cpu = (std::stod(f[14 - 3]) + std::stod(f[15 - 3])) / ticks;
  double start = boot_time_seconds() + std::stod(f[22 - 3]) / ticks;
  double vsize = std::stod(f[23 - 3]);
  double rss = std::stod(f[24 - 3]) * page;
  double fds = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator{"/proc/self/fd", ec};
       !ec && it != std::filesystem::directory_iterator{}; it.increment(ec))
    ++fds;
  using prometheus::MetricType;
  out.push_back(family("process_cpu_seconds_total", "Total user and system CPU time in seconds",
                       MetricType::Counter, cpu));
  out.push_back(family("process_start_time_seconds",
                       "Start time of the process since the Unix epoch in seconds",
                       MetricType::Gauge, start));
  out.push_back(family("process_virtual_memory_bytes", "Virtual memory size in bytes",
                       MetricType::Gauge, vsize));
  out.push_back(family("process_resident_memory_bytes", "Resident memory size in bytes",
                       MetricType::Gauge, rss));
  out.push_back(family("process_open_fds", "Number of open file descriptors", MetricType::Gauge,
                       fds));
  return out;
}

} // namespace loom
