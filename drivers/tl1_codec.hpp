#pragma once
// The TL1 dialect of Polatis-style optical switches (pure codec, no I/O): command splitting and
// parsing, port lists, and reply framing in both directions.
//
//   command: VERB:TID:AID:CTAG:...;   TID empty, bare or quoted
//   reply:   CRLF, "   <SID> <YY-MM-DD> <HH:MM:SS>", "M  <ctag> COMPLD|DENY",
//            data lines '   "<text>"' (DENY: a four-letter code line and a '/* reason */' line),
//            then a line holding only ';'.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::tl1 {

/// Deny codes in the style of Telcordia GR-833, as the emulator sends them.
namespace code {
inline constexpr std::string_view invalid_command = "IICM";  // unknown verb
inline constexpr std::string_view invalid_syntax = "IISP";   // malformed or too long
inline constexpr std::string_view invalid_ctag = "IICT";     // missing or malformed ctag
inline constexpr std::string_view invalid_port = "IIAC";     // port out of range / wrong side
inline constexpr std::string_view port_in_use = "SAAL";      // port already cross-connected
inline constexpr std::string_view not_connected = "SNVS";    // port has no cross-connect
inline constexpr std::string_view login_required = "PLNA";   // not logged in
inline constexpr std::string_view bad_login = "PIUI";        // wrong user or password
inline constexpr std::string_view operation_failed = "SROF"; // port failed, device refused
} // namespace code

/// "1&&4&7": sorted, consecutive runs of three or more as ranges.
std::string format_ports(std::vector<uint32_t> ports);

/// Parses "a", "a&b&c", "a&&b" and mixes of them; at most `max_ports` ports.
std::variant<std::vector<uint32_t>, std::string> parse_ports(std::string_view text,
                                                             size_t max_ports = 4096);

struct command {
  std::string verb;
  std::string tid;
  std::string aid;
  std::string ctag;
  std::vector<std::string> rest; // fields after the ctag
};

/// Parses one command (without its ';'). Nothing if it has fewer than four fields.
std::optional<command> parse_command(std::string_view text);

/// True when `ctag` is 1..10 letters or digits.
bool valid_ctag(std::string_view ctag);

/// Splits a byte stream into commands on ';', dropping CR and LF. A command longer than the
/// bound is reported once as an overflow and skipped up to its ';', so memory stays bounded.
class command_splitter {
public:
  explicit command_splitter(size_t max_command_bytes) : max_(max_command_bytes) {}

  struct item {
    std::string text;
    bool overflow = false;
  };

  /// Feeds bytes; appends every complete command to `out`.
  void feed(std::string_view bytes, std::vector<item>& out);

private:
  size_t max_;
  std::string partial_;
  bool skipping_ = false;
};

/// The port an alarm line (RTRV-ALM-ALL) is about, in the layouts GR-833 and vendors use:
/// "<port>:<severity>,<condition>,..." or "<port>,PORT:<severity>,...". Nothing for an
/// equipment alarm ("FAN-2,EQPT:MN,...") or a line of another shape.
std::optional<uint32_t> alarmed_port(std::string_view line);

struct reply {
  std::string ctag;
  bool completed = false;         // COMPLD vs DENY
  std::vector<std::string> data;  // unquoted data lines
  std::string code;               // DENY only
  std::string reason;             // DENY only
};

/// Frames a reply. Semicolons in data or reason are replaced (a ';' ends a reply).
std::string format_reply(std::string_view sid, std::string_view date, std::string_view time,
                         const reply& r);

/// Frames a reply as GR-831 does: each message opens with CR LF LF and ends with a bare ';'
/// (no line break after it), and a reply of more than `lines_per_message` data lines is sent
/// as several messages under the same ctag, all but the last ending with '>'.
std::string format_reply_gr831(std::string_view sid, std::string_view date,
                               std::string_view time, const reply& r,
                               size_t lines_per_message);

/// GR-831's in-progress acknowledgement of a command that takes a while: "IP <ctag>", '<'.
std::string format_in_progress(std::string_view ctag);

/// An autonomous message (GR-831 "*C <atag> REPT ALM ..."), framed like a GR-831 reply.
std::string format_autonomous(std::string_view sid, std::string_view date,
                              std::string_view time, uint32_t atag, std::string_view verb,
                              const std::vector<std::string>& data);

/// Client side: collects replies from a byte stream, framed as GR-831 frames them: a message
/// ends at a ';' (with or without a line break after it) or, when more of the same reply
/// follows under the same ctag, at a '>', whose parts are joined. A line longer than its bound, or a reply
/// whose data lines exceed theirs, is a protocol error (the peer is not a TL1 switch): memory
/// stays bounded whatever the peer sends. 4 MiB holds every patch of a 4096-port switch
/// many times over.
class reply_parser {
public:
  explicit reply_parser(size_t max_line_bytes = 65536, size_t max_reply_bytes = 4 << 20)
    : max_line_(max_line_bytes), max_reply_(max_reply_bytes) {}

  void feed(std::string_view bytes);
  std::optional<reply> next();
  bool failed() const { return failed_; }

private:
  void line(std::string_view text);

  size_t max_line_;
  size_t max_reply_;
  std::optional<reply> continued_; // a reply whose message ended with '>': more comes
  size_t reply_bytes_ = 0; // data held for the current reply
  std::string partial_;
  std::optional<reply> current_;
  std::vector<reply> done_;
  size_t taken_ = 0;
  bool failed_ = false;
};

} // namespace loom::tl1
