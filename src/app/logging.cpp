#include "app/logging.hpp"

#include <cstdio>
#include <mutex>
#include <string>

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

namespace loom {

namespace {

/// The longest event a line carries; peers choose some fields (reasons up to 16 KiB), so a
/// longer one is cut and says by how much.
constexpr size_t max_event_bytes = 2048;

/// One line per event on stderr: control characters in a message (a newline in a peer's
/// reason) are escaped, and the message is cut at max_event_bytes.
class line_sink final : public spdlog::sinks::base_sink<std::mutex> {
protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text;
    auto payload = std::string_view{msg.payload.data(), msg.payload.size()};
    for (size_t i = 0; i < payload.size() && text.size() < max_event_bytes; ++i) {
      auto c = static_cast<unsigned char>(payload[i]);
      if (c < 0x20 || c == 0x7f)
        fmt::format_to(std::back_inserter(text), "\\x{:02x}", c);
      else
        text.push_back(char(c));
    }
    if (text.size() >= max_event_bytes && payload.size() > max_event_bytes)
      fmt::format_to(std::back_inserter(text), " truncated_bytes={}",
                     payload.size() - max_event_bytes);
    auto line = msg;
    line.payload = spdlog::string_view_t{text.data(), text.size()};
    spdlog::memory_buf_t out;
    formatter_->format(line, out);
    std::fwrite(out.data(), 1, out.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }
};

/// libprotobuf writes its own lines to stderr, one per string field of invalid UTF-8 a peer
/// sends (the frame is refused as malformed anyway): at debug level, through the line sink.
void protobuf_log(google::protobuf::LogLevel level, const char* file, int line,
                  const std::string& message) {
  auto spd = level >= google::protobuf::LOGLEVEL_FATAL ? spdlog::level::critical
                                                        : spdlog::level::debug;
  spdlog::log(spd, "event=protobuf_log file={}:{} message=\"{}\"", file, line, message);
}

} // namespace

void setup_logging(log_level level) {
  spdlog::drop("loom");
  auto logger = std::make_shared<spdlog::logger>("loom", std::make_shared<line_sink>());
  spdlog::register_logger(logger);
  logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%f%z level=%l %v");
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  set_log_level(level);
  google::protobuf::SetLogHandler(protobuf_log);
}

void set_log_level(log_level level) {
  auto* logger = spdlog::default_logger_raw();
  switch (level) {
    case log_level::trace: logger->set_level(spdlog::level::trace); break;
    case log_level::debug: logger->set_level(spdlog::level::debug); break;
    case log_level::info: logger->set_level(spdlog::level::info); break;
    case log_level::warn: logger->set_level(spdlog::level::warn); break;
    case log_level::error: logger->set_level(spdlog::level::err); break;
  }
}

} // namespace loom
