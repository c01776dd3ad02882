#include "drivers/tl1_codec.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

namespace loom::tl1 {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint32_t> parse_port(std::string_view s) {
  uint32_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || ptr != s.data() + s.size() || v == 0)
    return std::nullopt;
  return v;
}

std::string sanitize(std::string_view s) {
  std::string out{s};
  std::replace(out.begin(), out.end(), ';', ',');
  std::replace(out.begin(), out.end(), '\r', ' ');
  std::replace(out.begin(), out.end(), '\n', ' ');
  return out;
}

} // namespace

std::string format_ports(std::vector<uint32_t> ports) {
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  std::string out;
  for (size_t i = 0; i < ports.size();) {
    size_t j = i;
    while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1)
      ++j;
    if (!out.empty())
      out += '&';
    if (j - i >= 2) {
      out += fmt::format("{}&&{}", ports[i], ports[j]);
    } else {
      out += std::to_string(ports[i]);
      for (size_t k = i + 1; k <= j; ++k)
        out += fmt::format("&{}", ports[k]);
    }
    i = j + 1;
  }
  return out;
}

std::variant<std::vector<uint32_t>, std::string> parse_ports(std::string_view text,
                                                             size_t max_ports) {
  std::vector<uint32_t> out;
  text = trim(text);
  if (text.empty())
    return std::string{"empty port list"};
  size_t pos = 0;
  while (pos <= text.size()) {
    auto amp = text.find('&', pos);
    auto first = text.substr(pos, amp == std::string_view::npos ? std::string_view::npos
                                                                : amp - pos);
    auto a = parse_port(first);
    if (!a)
      return fmt::format("'{}' is not a port number", first);
    if (amp != std::string_view::npos && amp + 1 < text.size() && text[amp + 1] == '&') {
      auto end = text.find('&', amp + 2);
      auto second = text.substr(amp + 2, end == std::string_view::npos ? std::string_view::npos
                                                                       : end - amp - 2);
      auto b = parse_port(second);
      if (!b || *b < *a)
        return fmt::format("'{}&&{}' is not a port range", first, second);
      if (out.size() + (*b - *a + 1) > max_ports)
        return fmt::format("more than {} ports", max_ports);
      for (uint32_t p = *a; p <= *b; ++p)
        out.push_back(p);
      if (end == std::string_view::npos)
        break;
      pos = end + 1;
    } else {
      if (out.size() + 1 > max_ports)
        return fmt::format("more than {} ports", max_ports);
      out.push_back(*a);
      if (amp == std::string_view::npos)
        break;
      pos = amp + 1;
    }
  }
  return out;
}

bool valid_ctag(std::string_view ctag) {
  return !ctag.empty() && ctag.size() <= 10
         && std::all_of(ctag.begin(), ctag.end(), [](char c) {
              return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
            });
}

std::optional<command> parse_command(std::string_view text) {
  std::vector<std::string> fields;
  size_t start = 0;
  bool quoted = false;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] == '"')
      quoted = !quoted;
    if (i == text.size() || (text[i] == ':' && !quoted)) {
      fields.emplace_back(trim(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (fields.size() < 4 || fields[0].empty())
    return std::nullopt;
  command c;
  c.verb = fields[0];
  std::transform(c.verb.begin(), c.verb.end(), c.verb.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
  c.tid = fields[1];
  if (c.tid.size() >= 2 && c.tid.front() == '"' && c.tid.back() == '"')
    c.tid = c.tid.substr(1, c.tid.size() - 2);
  c.aid = fields[2];
  c.ctag = fields[3];
  c.rest.assign(fields.begin() + 4, fields.end());
  return c;
}

void command_splitter::feed(std::string_view bytes, std::vector<item>& out) {
  for (char ch : bytes) {
    if (ch == ';') {
      if (skipping_) {
        skipping_ = false;
      } else {
        auto text = trim(partial_);
        if (!text.empty())
          out.push_back({std::string{text}, false});
      }
      partial_.clear();
      continue;
    }
    if (ch == '\r' || ch == '\n' || skipping_)
      continue;
    if (partial_.size() >= max_) {
      out.push_back({{}, true});
      partial_.clear();
      skipping_ = true;
      continue;
    }
    partial_ += ch;
  }
}

std::string format_reply(std::string_view sid, std::string_view date, std::string_view time,
                         const reply& r) {
  std::string out = fmt::format("\r\n   {} {} {}\r\nM  {} {}\r\n", sid, date, time,
                                sanitize(r.ctag), r.completed ? "COMPLD" : "DENY");
  if (!r.completed) {
    out += fmt::format("   {}\r\n", r.code);
    out += fmt::format("   /* {} */\r\n", sanitize(r.reason));
  }
  for (auto& d : r.data)
    out += fmt::format("   \"{}\"\r\n", sanitize(d));
  out += ";\r\n";
  return out;
}

namespace {

std::string gr831_header(std::string_view sid, std::string_view date, std::string_view time) {
  return fmt::format("\r\n\n   {} {} {}\r\n", sid, date, time);
}

} // namespace

std::string format_reply_gr831(std::string_view sid, std::string_view date,
                               std::string_view time, const reply& r,
                               size_t lines_per_message) {
  const auto status = fmt::format("M  {} {}\r\n", sanitize(r.ctag),
                                  r.completed ? "COMPLD" : "DENY");
  std::string out = gr831_header(sid, date, time) + status;
  if (!r.completed) {
    out += fmt::format("   {}\r\n", r.code);
    out += fmt::format("   /* {} */\r\n", sanitize(r.reason));
  }
  const size_t per = std::max<size_t>(1, lines_per_message);
  for (size_t i = 0; i < r.data.size(); ++i) {
    if (i > 0 && i % per == 0) // this message is full: the reply continues in the next one
      out += ">" + gr831_header(sid, date, time) + status;
    out += fmt::format("   \"{}\"\r\n", sanitize(r.data[i]));
  }
  return out + ";";
}

std::string format_in_progress(std::string_view ctag) {
  return fmt::format("\r\nIP {}\r\n<", sanitize(ctag));
}

std::string format_autonomous(std::string_view sid, std::string_view date,
                              std::string_view time, uint32_t atag, std::string_view verb,
                              const std::vector<std::string>& data) {
  std::string out = gr831_header(sid, date, time) + fmt::format("*C {} {}\r\n", atag, verb);
  for (auto& d : data)
    out += fmt::format("   \"{}\"\r\n", sanitize(d));
  return out + ";";
}

std::optional<uint32_t> alarmed_port(std::string_view line) {
  line = trim(line);
  if (!line.empty() && line.front() == '"')
    line = trim(line.substr(1));
  uint32_t port = 0;
  auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), port);
  if (ec != std::errc{} || end == line.data() + line.size() || port == 0)
    return std::nullopt;
  auto rest = std::string_view{end, size_t(line.data() + line.size() - end)};
  if (rest.front() == ':' || rest.starts_with(",PORT:"))
    return port;
  return std::nullopt;
}

void reply_parser::feed(std::string_view bytes) {
  for (char ch : bytes) {
    // A terminator alone on what is so far an empty line ends the message at once: a switch
    // need not send a line break after it (GR-831).
    if ((ch == ';' || ch == '>') && (current_ || continued_) && trim(partial_).empty()) {
      line(std::string_view{&ch, 1});
      partial_.clear();
      continue;
    }
    if (ch == '\n') {
      line(partial_);
      partial_.clear();
    } else if (ch != '\r') {
      if (partial_.size() >= max_line_) {
        failed_ = true;
        partial_.clear();
        continue;
      }
      partial_ += ch;
    }
  }
}

void reply_parser::line(std::string_view text) {
  if (text.rfind("M  ", 0) == 0) {
    auto rest = trim(text.substr(3));
    auto space = rest.find(' ');
    reply r;
    r.ctag = std::string{rest.substr(0, space)};
    auto status = space == std::string_view::npos ? std::string_view{} : trim(rest.substr(space));
    r.completed = status.rfind("COMPLD", 0) == 0;
    if (continued_ && continued_->ctag == r.ctag) { // the next part of a '>' reply
      current_ = std::move(continued_);
      continued_.reset();
      return;
    }
    current_ = std::move(r);
    reply_bytes_ = 0;
    return;
  }
  if (!current_)
    return; // blank line or header before the response line
  if ((reply_bytes_ += text.size()) > max_reply_) {
    failed_ = true;
    current_.reset();
    return;
  }
  auto t = trim(text);
  if (t == ">") {
    continued_ = std::move(current_);
    current_.reset();
  } else if (t == ";") {
    done_.push_back(std::move(*current_));
    current_.reset();
  } else if (t.size() >= 2 && t.front() == '"' && t.back() == '"') {
    current_->data.emplace_back(t.substr(1, t.size() - 2));
  } else if (t.rfind("/*", 0) == 0) {
    auto body = t.substr(2);
    if (body.size() >= 2 && body.substr(body.size() - 2) == "*/")
      body.remove_suffix(2);
    current_->reason = std::string{trim(body)};
  } else if (!t.empty() && current_->code.empty()) {
    current_->code = std::string{t};
  }
}

std::optional<reply> reply_parser::next() {
  if (taken_ >= done_.size()) {
    done_.clear();
    taken_ = 0;
    return std::nullopt;
  }
  return std::move(done_[taken_++]);
}

} // namespace loom::tl1
