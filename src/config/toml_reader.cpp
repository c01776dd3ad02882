#include "config/toml_reader.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

namespace loom {

std::string config_error::to_string() const {
  std::string out = file;
  if (line > 0)
    out += fmt::format(":{}:{}", line, column);
  out += ": ";
  if (!key.empty()) {
    out += key;
    out += ": ";
  }
  out += message;
  return out;
}

void config_diagnostics::error(const toml::source_region& where, std::string key,
                               std::string message) {
  errors_.push_back(config_error{file_, static_cast<int>(where.begin.line),
                                 static_cast<int>(where.begin.column), std::move(key),
                                 std::move(message)});
}

table_reader::table_reader(const toml::table& table, std::string path,
                           config_diagnostics& diag)
  : table_(&table), path_(std::move(path)), diag_(&diag) {}

std::string table_reader::key_path(std::string_view key) const {
  if (path_.empty())
    return std::string{key};
  return fmt::format("{}.{}", path_, key);
}

const toml::node* table_reader::find(std::string_view key) {
  seen_.emplace(key);
  return table_->get(key);
}

const toml::source_region& table_reader::where(std::string_view key) const {
  if (auto* node = table_->get(key))
    return node->source();
  return table_->source();
}

int table_reader::line_of(std::string_view key) const {
  return static_cast<int>(where(key).begin.line);
}

void table_reader::error(std::string_view key, std::string message) {
  diag_->error(where(key), key_path(key), std::move(message));
}

namespace {

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
  }
}

template <class T>
constexpr std::string_view expected_name() {
  if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else if constexpr (std::is_same_v<T, int64_t>)
    return "an integer";
  else if constexpr (std::is_same_v<T, double>)
    return "a number";
  else if constexpr (std::is_same_v<T, bool>)
    return "a boolean";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return "an array of strings";
  else if constexpr (std::is_same_v<T, std::vector<double>>)
    return "an array of numbers";
  else
    return "an array of integers";
}

template <class T>
std::optional<T> convert(const toml::node& node) {
  if constexpr (std::is_same_v<T, double>) {
    if (auto v = node.value_exact<double>())
      return *v;
    if (auto v = node.value_exact<int64_t>())
      return static_cast<double>(*v);
    return std::nullopt;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>
                       || std::is_same_v<T, std::vector<int64_t>>
                       || std::is_same_v<T, std::vector<double>>) {
    auto* arr = node.as_array();
    if (!arr)
      return std::nullopt;
    T out;
    for (auto& elem : *arr) {
      auto s = convert<typename T::value_type>(elem);
      if (!s)
        return std::nullopt;
      out.push_back(*s);
    }
    return out;
  } else {
    if (auto v = node.value_exact<T>())
      return *v;
    return std::nullopt;
  }
}

/// toml++ reads `inf` and `nan`; no setting means either.
template <class T>
bool finite(const T& v) {
  if constexpr (std::is_same_v<T, double>)
    return std::isfinite(v);
  else if constexpr (std::is_same_v<T, std::vector<double>>)
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  else
    return true;
}

} // namespace

template <class T>
std::optional<T> table_reader::checked(std::string_view key, const toml::node& node) {
  auto value = convert<T>(node);
  if (!value) {
    error(key, fmt::format("expected {}, got {}", expected_name<T>(), type_name(node)));
  } else if (!finite(*value)) {
    error(key, "must be a finite number");
    return std::nullopt;
  }
  return value;
}

template <class T>
std::optional<T> table_reader::required(std::string_view key) {
  auto* node = find(key);
  if (!node) {
    diag_->error(table_->source(), key_path(key),
                 fmt::format("missing required key (expected {})", expected_name<T>()));
    return std::nullopt;
  }
  return checked<T>(key, *node);
}

template <class T>
std::optional<T> table_reader::optional(std::string_view key, T fallback) {
  auto* node = find(key);
  if (!node)
    return fallback;
  return checked<T>(key, *node);
}

std::optional<table_reader> table_reader::table(std::string_view key) {
  auto* node = find(key);
  if (!node)
    return std::nullopt;
  auto* tbl = node->as_table();
  if (!tbl) {
    error(key, fmt::format("expected a table, got {}", type_name(*node)));
    return std::nullopt;
  }
  return table_reader{*tbl, key_path(key), *diag_};
}

std::optional<table_reader> table_reader::required_table(std::string_view key) {
  if (!table_->get(key)) {
    seen_.emplace(key);
    diag_->error(table_->source(), key_path(key), "missing required table");
    return std::nullopt;
  }
  return table(key);
}

std::vector<table_reader> table_reader::table_array(std::string_view key) {
  std::vector<table_reader> out;
  auto* node = find(key);
  if (!node)
    return out;
  auto* arr = node->as_array();
  if (!arr) {
    error(key, fmt::format("expected an array of tables ([[{}]]), got {}", key_path(key),
                           type_name(*node)));
    return out;
  }
  for (size_t i = 0; i < arr->size(); ++i) {
    auto path = fmt::format("{}[{}]", key_path(key), i);
    auto* tbl = arr->get(i)->as_table();
    if (!tbl) {
      diag_->error(arr->get(i)->source(), path,
                   fmt::format("expected a table, got {}", type_name(*arr->get(i))));
      continue;
    }
    out.emplace_back(*tbl, std::move(path), *diag_);
  }
  return out;
}

std::vector<std::pair<std::string, table_reader>>
table_reader::named_tables(std::string_view key) {
  std::vector<std::pair<std::string, table_reader>> out;
  auto outer = table(key);
  if (!outer)
    return out;
  for (auto& [name, node] : *outer->table_) {
    std::string name_str{name.str()};
    outer->seen_.insert(name_str);
    auto* tbl = node.as_table();
    if (!tbl) {
      outer->error(name_str, fmt::format("expected a table, got {}", type_name(node)));
      continue;
    }
    out.emplace_back(name_str, table_reader{*tbl, outer->key_path(name_str), *diag_});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) {
    auto& pa = a.second.table_->source().begin;
    auto& pb = b.second.table_->source().begin;
    return std::tie(pa.line, pa.column) < std::tie(pb.line, pb.column);
  });
  return out;
}

void table_reader::reject_unknown() {
  for (auto& [name, node] : *table_) {
    if (seen_.count(name.str()) == 0)
      diag_->error(node.source(), key_path(name.str()), "unknown key");
  }
}

template std::optional<std::string> table_reader::required(std::string_view);
template std::optional<int64_t> table_reader::required(std::string_view);
template std::optional<double> table_reader::required(std::string_view);
template std::optional<bool> table_reader::required(std::string_view);
template std::optional<std::vector<std::string>> table_reader::required(std::string_view);
template std::optional<std::vector<int64_t>> table_reader::required(std::string_view);
template std::optional<std::string> table_reader::optional(std::string_view, std::string);
template std::optional<int64_t> table_reader::optional(std::string_view, int64_t);
template std::optional<double> table_reader::optional(std::string_view, double);
template std::optional<bool> table_reader::optional(std::string_view, bool);
template std::optional<std::vector<std::string>>
table_reader::optional(std::string_view, std::vector<std::string>);
template std::optional<std::vector<int64_t>>
table_reader::optional(std::string_view, std::vector<int64_t>);
template std::optional<std::vector<double>>
table_reader::optional(std::string_view, std::vector<double>);

std::optional<toml::table> parse_toml(std::string_view text, const std::string& source,
                                      std::vector<config_error>& errors) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    auto& pos = e.source().begin;
    errors.push_back(config_error{source, static_cast<int>(pos.line),
                                  static_cast<int>(pos.column), "",
                                  std::string{e.description()}});
    return std::nullopt;
  }
}

std::optional<std::string> read_text_file(const std::string& path,
                                          std::vector<config_error>& errors) {
  // stat first: a FIFO would block the open, a device would never end.
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    errors.push_back(config_error{path, 0, 0, "", "cannot open file"});
    return std::nullopt;
  }
  if (!std::filesystem::is_regular_file(status)) {
    errors.push_back(config_error{path, 0, 0, "", "not a regular file"});
    return std::nullopt;
  }
  auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_text_file_bytes) {
    errors.push_back(config_error{
      path, 0, 0, "",
      fmt::format("{} bytes is over the {} MiB limit for a text file", size,
                  max_text_file_bytes >> 20)});
    return std::nullopt;
  }
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    errors.push_back(config_error{path, 0, 0, "", "cannot open file"});
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::optional<double> positive(table_reader& r, std::string_view key, std::optional<double> v) {
  if (v && !(*v > 0 && *v <= max_real_setting)) {
    r.error(key, fmt::format("must be in (0, {:g}], got {}", max_real_setting, *v));
    return std::nullopt;
  }
  return v;
}

void positive_into(table_reader& r, std::string_view key, double& field) {
  if (auto v = positive(r, key, r.optional<double>(key, field)))
    field = *v;
}

std::optional<double> non_negative(table_reader& r, std::string_view key,
                                   std::optional<double> v) {
  if (v && !(*v >= 0 && *v <= max_real_setting)) {
    r.error(key, fmt::format("must be in [0, {:g}], got {}", max_real_setting, *v));
    return std::nullopt;
  }
  return v;
}

std::optional<double> fraction(table_reader& r, std::string_view key, std::optional<double> v) {
  if (v && !(*v > 0 && *v <= 1)) {
    r.error(key, fmt::format("must be in (0, 1], got {}", *v));
    return std::nullopt;
  }
  return v;
}

} // namespace loom
