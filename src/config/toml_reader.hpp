#pragma once
// Strict reading of TOML tables: every error names file, line, column and the full key path,
// and keys nobody asked for are reported as unknown. Used by the readers of config files, job
// specs and replay scenarios; nothing else includes toml++.

#include <toml++/toml.h>

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "types/config_error.hpp"
#include "types/names.hpp"

namespace loom {

class config_diagnostics {
public:
  explicit config_diagnostics(std::string file) : file_(std::move(file)) {}

  void error(const toml::source_region& where, std::string key, std::string message);

  const std::string& file() const { return file_; }
  const std::vector<config_error>& errors() const { return errors_; }
  std::vector<config_error> take_errors() { return std::move(errors_); }

private:
  std::string file_;
  std::vector<config_error> errors_;
};

class table_reader {
public:
  table_reader(const toml::table& table, std::string path, config_diagnostics& diag);

  /// The value at `key`, or nothing after reporting a missing key or a wrong type.
  /// T is one of std::string, int64_t, double (integers accepted), bool,
  /// std::vector<std::string>, std::vector<int64_t>.
  template <class T>
  std::optional<T> required(std::string_view key);

  /// The value at `key`, `fallback` when absent, nothing after reporting a wrong type.
  template <class T>
  std::optional<T> optional(std::string_view key, T fallback);

  /// A sub-table; nothing (without error) if absent, nothing (with error) if not a table.
  std::optional<table_reader> table(std::string_view key);

  /// A sub-table that must be present.
  std::optional<table_reader> required_table(std::string_view key);

  /// An array of tables ([[key]]); empty if absent.
  std::vector<table_reader> table_array(std::string_view key);

  /// The entries of a table of tables ([key.NAME]), in file order.
  std::vector<std::pair<std::string, table_reader>> named_tables(std::string_view key);

  /// Reports an error at the value of `key` (or the table itself if the key is absent).
  void error(std::string_view key, std::string message);

  /// Reports every key of this table that was never read.
  void reject_unknown();

  std::string key_path(std::string_view key) const;
  const std::string& path() const { return path_; }
  int line_of(std::string_view key) const;

private:
  const toml::node* find(std::string_view key);
  /// The node as T, or nothing after reporting a wrong type or a non-finite number.
  template <class T>
  std::optional<T> checked(std::string_view key, const toml::node& node);
  const toml::source_region& where(std::string_view key) const;

  const toml::table* table_;
  std::string path_;
  config_diagnostics* diag_;
  std::set<std::string, std::less<>> seen_;
};

extern template std::optional<std::string> table_reader::required(std::string_view);
extern template std::optional<int64_t> table_reader::required(std::string_view);
extern template std::optional<double> table_reader::required(std::string_view);
extern template std::optional<bool> table_reader::required(std::string_view);
extern template std::optional<std::vector<std::string>>
table_reader::required(std::string_view);
extern template std::optional<std::vector<int64_t>> table_reader::required(std::string_view);
extern template std::optional<std::string> table_reader::optional(std::string_view,
                                                                  std::string);
extern template std::optional<int64_t> table_reader::optional(std::string_view, int64_t);
extern template std::optional<double> table_reader::optional(std::string_view, double);
extern template std::optional<bool> table_reader::optional(std::string_view, bool);
extern template std::optional<std::vector<std::string>>
table_reader::optional(std::string_view, std::vector<std::string>);
extern template std::optional<std::vector<int64_t>>
table_reader::optional(std::string_view, std::vector<int64_t>);
extern template std::optional<std::vector<double>>
table_reader::optional(std::string_view, std::vector<double>);

/// Parses TOML text; a syntax error is appended to `errors` (located) and gives nothing.
std::optional<toml::table> parse_toml(std::string_view text, const std::string& source,
                                      std::vector<config_error>& errors);

/// Config files, job specs and scenarios are text far below this.
constexpr uintmax_t max_text_file_bytes = uintmax_t{16} << 20;

/// The whole file, or nothing after appending why not to `errors`: it cannot be opened, is
/// not a regular file (a FIFO or device is never read), or is over max_text_file_bytes.
std::optional<std::string> read_text_file(const std::string& path,
                                          std::vector<config_error>& errors);

// -- value checks: each reports at the key's own line and drops the value --------------------

/// In [min, max]: settings whose type would wrap, or that make no sense, above max.
template <class T>
std::optional<T> within(table_reader& r, std::string_view key, std::optional<T> v, T min, T max) {
  if (v && (*v < min || *v > max)) {
    r.error(key, fmt::format("must be in {}..{}, got {}", min, max, *v));
    return std::nullopt;
  }
  return v;
}

/// No integer setting is meant to be above this; every one fits an int or a uint32_t below it.
constexpr int64_t max_integer_setting = 2'147'483'647;

/// No real setting is meant to be above this either: durations in ms or s and sizes in GB stay
/// far inside int64 nanoseconds and bytes, whatever they are converted to.
constexpr double max_real_setting = 1e9;

/// At least `min`; an integer also at most max_integer_setting, so that no narrowing wraps.
template <class T>
std::optional<T> at_least(table_reader& r, std::string_view key, std::optional<T> v, T min) {
  if constexpr (std::is_integral_v<T>)
    if (v && *v > T(max_integer_setting))
      return within<T>(r, key, v, min, T(max_integer_setting));
  if (v && *v < min) {
    r.error(key, fmt::format("must be at least {}, got {}", min, *v));
    return std::nullopt;
  }
  return v;
}

std::optional<double> positive(table_reader& r, std::string_view key, std::optional<double> v);
std::optional<double> non_negative(table_reader& r, std::string_view key,
                                   std::optional<double> v);
/// Reads `key` into `field` when present and positive; `field` is also the default.
void positive_into(table_reader& r, std::string_view key, double& field);
/// In (0, 1].
std::optional<double> fraction(table_reader& r, std::string_view key, std::optional<double> v);

/// Maps a string to a value of a named enum, reporting the allowed names otherwise.
template <named_enum E>
std::optional<E> one_of(table_reader& r, std::string_view key, std::optional<std::string> v) {
  if (!v)
    return std::nullopt;
  if (auto e = parse_name<E>(*v))
    return e;
  r.error(key, fmt::format("'{}' is not one of: {}", *v, names_of<E>()));
  return std::nullopt;
}

/// Maps a string to one of `choices`, reporting the allowed names otherwise.
template <class E>
std::optional<E> one_of(table_reader& r, std::string_view key, std::optional<std::string> v,
                        const std::vector<std::pair<std::string_view, E>>& choices) {
  if (!v)
    return std::nullopt;
  std::string names;
  for (auto& [name, value] : choices) {
    if (name == *v)
      return value;
    names += names.empty() ? "" : ", ";
    names += name;
  }
  r.error(key, fmt::format("'{}' is not one of: {}", *v, names));
  return std::nullopt;
}

} // namespace loom
