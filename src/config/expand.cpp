#include "config/expand.hpp"

#include <charconv>
#include <fmt/format.h>

namespace loom {

namespace {

bool parse_number(std::string_view s, long& out) {
  if (s.empty())
    return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size() && out >= 0;
}

} // namespace

std::variant<std::vector<std::string>, std::string> expand_range(std::string_view pattern) {
  auto open = pattern.find('{');
  auto close = pattern.find('}');
  if (open == std::string_view::npos && close == std::string_view::npos)
    return std::vector<std::string>{std::string{pattern}};
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return fmt::format("unbalanced braces in '{}'", pattern);
  if (pattern.find('{', open + 1) != std::string_view::npos)
    return fmt::format("more than one range in '{}'", pattern);
  auto body = pattern.substr(open + 1, close - open - 1);
  auto dots = body.find("..");
  long lo = 0;
  long hi = 0;
  if (dots == std::string_view::npos || !parse_number(body.substr(0, dots), lo)
      || !parse_number(body.substr(dots + 2), hi))
    return fmt::format("range '{{{}}}' in '{}' is not of the form {{a..b}} with a, b >= 0", body,
                       pattern);
  if (hi < lo)
    return fmt::format("range '{{{}}}' in '{}' is empty (b < a)", body, pattern);
  if (hi - lo >= 1'000'000)
    return fmt::format("range '{{{}}}' in '{}' has more than 1000000 elements", body, pattern);
  auto width = body.substr(0, dots).size();
  bool padded = width > 1 && body[0] == '0';
  auto prefix = pattern.substr(0, open);
  auto suffix = pattern.substr(close + 1);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(hi - lo + 1));
  for (long i = lo; i <= hi; ++i) {
    auto num = padded ? fmt::format("{:0{}}", i, width) : std::to_string(i);
    out.push_back(fmt::format("{}{}{}", prefix, num, suffix));
  }
  return out;
}

} // namespace loom
