#pragma once
// One name table per enum: the names its values have in config files, logs, reports, the CLI
// and the wire's text fields. An enum opts in by specialising enum_names<E> with `table`, an
// array of {value, name}; to_string, parse_name and names_of then work for it, fmt prints it
// by name, and nothing else spells those names.

#include <array>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

namespace loom {

template <class E>
struct enum_names; // specialise: static constexpr std::array<std::pair<E, std::string_view>, N> table

template <class E>
concept named_enum = std::is_enum_v<E> && requires { enum_names<E>::table; };

template <named_enum E>
constexpr std::string_view to_string(E x) {
  for (auto& [value, name] : enum_names<E>::table)
    if (value == x)
      return name;
  return "?";
}

template <named_enum E>
constexpr std::optional<E> parse_name(std::string_view s) {
  for (auto& [value, name] : enum_names<E>::table)
    if (name == s)
      return value;
  return std::nullopt;
}

/// Every value of E in table order.
template <named_enum E>
constexpr auto all_values() {
  std::array<E, enum_names<E>::table.size()> out{};
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = enum_names<E>::table[i].first;
  return out;
}

/// Prints the name (test frameworks, stream-based logs).
template <named_enum E>
std::ostream& operator<<(std::ostream& os, E x) {
  return os << to_string(x);
}

/// "a, b, c": every name, for error messages.
template <named_enum E>
std::string names_of() {
  std::string out;
  for (auto& [value, name] : enum_names<E>::table) {
    out += out.empty() ? "" : ", ";
    out += name;
  }
  return out;
}

} // namespace loom

template <loom::named_enum E>
struct fmt::formatter<E> : fmt::formatter<std::string_view> {
  template <class Context>
  auto format(E x, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(loom::to_string(x), ctx);
  }
};
