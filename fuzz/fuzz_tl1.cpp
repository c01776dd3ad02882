// The TL1 codec and the emulated switch behind it, from raw bytes as a client would send them:
// split into commands, parse, execute, frame the reply, and parse that reply back (it must read
// back as sent). Port lists must read back as formatted. A violated property aborts.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "drivers/tl1_codec.hpp"
#include "drivers/tl1_switch.hpp"

namespace {

void require(bool ok) {
  if (!ok)
    std::abort();
}

void check_reply_round_trip(const loom::tl1::reply& sent) {
  loom::tl1::reply_parser parser;
  parser.feed(loom::tl1::format_reply("LOOM-OCS", "26-11-25", "10:00:00", sent));
  auto back = parser.next();
  require(!parser.failed() && back.has_value());
  require(back->ctag == sent.ctag && back->completed == sent.completed);
  require(back->data.size() == sent.data.size());
}

void check_ports(std::string_view text) {
  auto parsed = loom::tl1::parse_ports(text, 512);
  if (auto* ports = std::get_if<std::vector<uint32_t>>(&parsed)) {
    auto again = loom::tl1::parse_ports(loom::tl1::format_ports(*ports), 512);
    require(std::holds_alternative<std::vector<uint32_t>>(again));
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes{reinterpret_cast<const char*>(data), size};
  loom::tl1_switch sw{{}};
  loom::tl1_session session;
  loom::tl1::command_splitter splitter{4096};
  std::vector<loom::tl1::command_splitter::item> items;
  // Fed in two pieces: a command split across reads must parse the same.
  splitter.feed(bytes.substr(0, size / 2), items);
  splitter.feed(bytes.substr(size / 2), items);
  for (auto& item : items) {
    if (item.overflow)
      continue;
    auto cmd = loom::tl1::parse_command(item.text);
    if (!cmd)
      continue;
    for (auto& field : cmd->rest)
      check_ports(field);
    check_ports(cmd->aid);
    auto reply = sw.execute(session, *cmd);
    check_reply_round_trip(reply);
  }
  // The client side takes any bytes too, bounded.
  loom::tl1::reply_parser client{1024};
  client.feed(bytes);
  while (client.next()) {
  }
  return 0;
}
