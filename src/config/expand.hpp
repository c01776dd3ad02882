#pragma once
// Brace ranges in ids: "h20-{0..40}" names 41 nodes, the way operators write host lists.

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom {

/// Expands at most one "{a..b}" range (a <= b, decimal, b - a < 1,000,000). A string without
/// braces expands to itself. Zero-padding of `a` is kept ("{00..15}" gives "00".."15").
/// Returns the expansion or a message saying what is malformed.
std::variant<std::vector<std::string>, std::string> expand_range(std::string_view pattern);

} // namespace loom
