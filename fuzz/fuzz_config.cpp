// The config reader and the job spec reader, from raw text: either a config or errors, never
// both or neither, every error located; a job spec that reads must read back from its own
// formatting to the same text (format_job_spec promises every number exactly). A violated
// property aborts.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/config.hpp"
#include "scheduler/job_spec.hpp"

namespace {

void require(bool ok) {
  if (!ok)
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text{reinterpret_cast<const char*>(data), size};
  auto cfg = loom::parse_config(text, "fuzz.toml");
  require(cfg.value.has_value() == cfg.errors.empty());
  for (auto& e : cfg.errors)
    require(e.file == "fuzz.toml" && !e.message.empty());

  auto job = loom::parse_job_spec(text, "job.toml", 1.5);
  if (job.value) {
    auto formatted = loom::format_job_spec(*job.value);
    auto again = loom::parse_job_spec(formatted, "formatted.toml", 1.5);
    require(again.value.has_value());
    require(loom::format_job_spec(*again.value) == formatted);
  }
  return 0;
}
