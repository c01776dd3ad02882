#include "app/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace loom {

void setup_logging(log_level level) {
  auto logger = spdlog::stderr_logger_mt("loom");
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%f%z level=%l %v");
  switch (level) {
    case log_level::trace: logger->set_level(spdlog::level::trace); break;
    case log_level::debug: logger->set_level(spdlog::level::debug); break;
    case log_level::info: logger->set_level(spdlog::level::info); break;
    case log_level::warn: logger->set_level(spdlog::level::warn); break;
    case log_level::error: logger->set_level(spdlog::level::err); break;
  }
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

} // namespace loom
