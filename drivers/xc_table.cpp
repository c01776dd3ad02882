#include "drivers/xc_table.hpp"

#include <fmt/format.h>

namespace loom {

xc_table::xc_table(switch_size size, std::set<uint32_t> masked)
  : size_(size),
    masked_(std::move(masked)),
    out_of_(size_t{size.inputs} + 1, 0),
    in_of_(size_t{size.outputs} + 1, 0) {}

std::optional<uint32_t> xc_table::output_of(uint32_t in) const {
  if (!is_input(in) || out_of_[in] == 0)
    return std::nullopt;
  return out_of_[in];
}

std::optional<uint32_t> xc_table::input_of(uint32_t out) const {
  if (!is_output(out) || in_of_[out - size_.inputs] == 0)
    return std::nullopt;
  return in_of_[out - size_.inputs];
}

std::optional<xc_violation> xc_table::check(const xc_diff& diff) const {
  using kind = xc_violation::kind;
  auto violation = [](kind k, uint32_t port, const char* op, const cross_connect& x,
                      std::string why) {
    return xc_violation{k, port, fmt::format("{} {},{}: {}", op, x.in, x.out, why)};
  };
  auto range = [&](const char* op, const cross_connect& x) -> std::optional<xc_violation> {
    if (!is_input(x.in))
      return violation(kind::invalid_port, x.in, op, x,
                       fmt::format("port {} is not an input (inputs are 1..{})", x.in,
                                   size_.inputs));
    if (!is_output(x.out))
      return violation(kind::invalid_port, x.out, op, x,
                       fmt::format("port {} is not an output (outputs are {}..{})", x.out,
                                   uint64_t{size_.inputs} + 1,
                                   uint64_t{size_.inputs} + size_.outputs));
    return std::nullopt;
  };
  std::set<uint32_t> removed;
  for (auto& x : diff.removes) {
    if (auto v = range("remove", x))
      return v;
    if (output_of(x.in) != x.out)
      return violation(kind::no_such_cross_connect, x.in, "remove", x, "no such cross-connect");
    if (!removed.insert(x.in).second)
      return violation(kind::duplicate_port, x.in, "remove", x, "cross-connect listed twice");
    removed.insert(x.out);
  }
  std::set<uint32_t> added;
  for (auto& x : diff.adds) {
    if (auto v = range("add", x))
      return v;
    for (auto port : {x.in, x.out}) {
      if (masked_.count(port))
        return violation(kind::masked_port, port, "add", x,
                         fmt::format("port {} is masked", port));
      if (!added.insert(port).second)
        return violation(kind::duplicate_port, port, "add", x,
                         fmt::format("port {} is used twice in the diff", port));
    }
    if (output_of(x.in) && !removed.count(x.in))
      return violation(kind::port_in_use, x.in, "add", x,
                       fmt::format("input {} is in use by {},{}", x.in, x.in, *output_of(x.in)));
    if (input_of(x.out) && !removed.count(x.out))
      return violation(kind::port_in_use, x.out, "add", x,
                       fmt::format("output {} is in use by {},{}", x.out, *input_of(x.out),
                                   x.out));
  }
  return std::nullopt;
}

void xc_table::apply(const xc_diff& diff) {
  for (auto& x : diff.removes) {
    out_of_[x.in] = 0;
    in_of_[x.out - size_.inputs] = 0;
    --count_;
  }
  for (auto& x : diff.adds) {
    out_of_[x.in] = x.out;
    in_of_[x.out - size_.inputs] = x.in;
    ++count_;
  }
}

void xc_table::assign(const std::vector<cross_connect>& xcs) {
  std::fill(out_of_.begin(), out_of_.end(), 0);
  std::fill(in_of_.begin(), in_of_.end(), 0);
  count_ = 0;
  for (auto& x : xcs) {
    if (!is_input(x.in) || !is_output(x.out))
      continue;
    out_of_[x.in] = x.out;
    in_of_[x.out - size_.inputs] = x.in;
    ++count_;
  }
}

xc_diff xc_table::diff_to(const std::vector<cross_connect>& target) const {
  xc_diff d;
  std::vector<uint32_t> want(out_of_.size(), 0);
  for (auto& x : target)
    if (is_input(x.in))
      want[x.in] = x.out;
  for (uint32_t in = 1; in <= size_.inputs; ++in)
    if (out_of_[in] != 0 && out_of_[in] != want[in])
      d.removes.push_back({in, out_of_[in]});
  for (auto& x : target)
    if (!is_input(x.in) || out_of_[x.in] != x.out)
      d.adds.push_back(x);
  return d;
}

std::vector<cross_connect> xc_table::list() const {
  std::vector<cross_connect> out;
  out.reserve(count_);
  for (uint32_t in = 1; in <= size_.inputs; ++in)
    if (out_of_[in] != 0)
      out.push_back({in, out_of_[in]});
  return out;
}

} // namespace loom
