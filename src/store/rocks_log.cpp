#include "store/rocks_log.hpp"

#include <cstdarg>
#include <cstdio>

#include <rocksdb/env.h>
#include <spdlog/spdlog.h>

namespace loom {

namespace {

constexpr size_t max_message = 512;

class spdlog_logger final : public rocksdb::Logger {
public:
  spdlog_logger() : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::WARN_LEVEL, format, ap);
  }

  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < GetInfoLogLevel() || level == rocksdb::InfoLogLevel::HEADER_LEVEL)
      return;
    char text[max_message];
    std::vsnprintf(text, sizeof text, format, ap);
    spdlog::log(level >= rocksdb::InfoLogLevel::ERROR_LEVEL ? spdlog::level::err
                                                            : spdlog::level::warn,
                "event=rocksdb_log message=\"{}\"", text);
  }
};

} // namespace

std::shared_ptr<rocksdb::Logger> rocks_log() {
  static auto shared = std::make_shared<spdlog_logger>();
  return shared;
}

} // namespace loom
