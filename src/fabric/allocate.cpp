#include "fabric/allocate.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <queue>
#include <tuple>

namespace loom {

double pair_time(double bytes_uv, double bytes_vu, uint32_t circuits, double link_bytes_per_s) {
  if (bytes_uv + bytes_vu <= 0)
    return 0;
  if (circuits == 0)
    return std::numeric_limits<double>::infinity();
  return std::max(bytes_uv, bytes_vu) / (circuits * link_bytes_per_s);
}

uint32_t allocation::circuits_between(uint32_t u, uint32_t v) const {
  auto key = std::minmax(u, v);
  auto it = std::lower_bound(circuits.begin(), circuits.end(), key, [](const circuit_count& c,
                                                                       const auto& k) {
    return std::tie(c.a, c.b) < std::tie(k.first, k.second);
  });
  return it != circuits.end() && it->a == key.first && it->b == key.second ? it->circuits : 0;
}

namespace {

/// An undirected pair with demand both ways and the circuits it has so far.
struct pair_state {
  uint32_t a;
  uint32_t b;
  double ab = 0;
  double ba = 0;
  uint32_t circuits = 0;
};

/// Undirected candidate pairs from the sparse directed demands and their reverses, indexed by
/// a flat upper triangle when demand is dense, a hash map when it is sparse.
std::vector<pair_state> demanded_pairs(size_t n, const std::vector<demand>& demands,
                                       const std::function<bool(uint32_t, uint32_t)>& eligible) {
  const bool dense = n <= 4096 && demands.size() >= n * n / 16;
  std::vector<int64_t> flat(dense ? n * (n - 1) / 2 : 0, -1);
  std::unordered_map<uint64_t, size_t> sparse;
  if (!dense)
    sparse.reserve(demands.size());
  auto slot_of = [&](uint32_t a, uint32_t b, size_t next) -> std::pair<size_t, bool> {
    if (dense) {
      // Row a of the upper triangle starts after a * (2n - a - 1) / 2 entries.
      auto& slot = flat[size_t(a) * (2 * n - a - 1) / 2 + (b - a - 1)];
      bool fresh = slot < 0;
      if (fresh)
        slot = int64_t(next);
      return {size_t(slot), fresh};
    }
    auto [it, fresh] = sparse.emplace(uint64_t{a} << 32 | b, next);
    return {it->second, fresh};
  };
  std::vector<pair_state> pairs;
  for (auto& d : demands) {
    if (d.from == d.to || d.bytes <= 0 || d.from >= n || d.to >= n)
      continue;
    auto key = std::minmax(d.from, d.to);
    if (eligible && !eligible(key.first, key.second))
      continue;
    auto [i, fresh] = slot_of(key.first, key.second, pairs.size());
    if (fresh)
      pairs.push_back({key.first, key.second});
    auto& p = pairs[i];
    (d.from == p.a ? p.ab : p.ba) += d.bytes;
  }
  return pairs;
}

/// Phase 1: while any demanded pair has no circuit, Alg. 3 picks among those (T = inf), largest
/// directional demand first; their order never changes, so one sorted pass gives exactly the
/// same choices as the argmax loop.
template <class Serve>
void serve_uncovered(std::vector<pair_state>& pairs, const allocation& out, Serve serve) {
  struct ranked {
    double demand;
    uint32_t a;
    uint32_t b;
    size_t i;
  };
  std::vector<ranked> order;
  order.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i)
    order.push_back({std::max(pairs[i].ab, pairs[i].ba), pairs[i].a, pairs[i].b, i});
  std::sort(order.begin(), order.end(), [](const ranked& x, const ranked& y) {
    if (x.demand != y.demand)
      return x.demand > y.demand;
    return std::tie(x.a, x.b) < std::tie(y.a, y.b);
  });
  for (auto& r : order)
    if (out.free_ports[r.a] > 0 && out.free_ports[r.b] > 0)
      serve(pairs[r.i]);
}

/// Phase 2: pairs with circuits, by finite T_pair on a max-heap; ties by directional demand,
/// then the smaller pair. A pair whose endpoint has run out of ports drops out for good.
template <class Serve>
void serve_slowest(std::vector<pair_state>& pairs, const allocation& out,
                   double link_bytes_per_s, Serve serve) {
  using entry = std::tuple<double, double, uint32_t, uint32_t, size_t>;
  auto less = [](const entry& x, const entry& y) {
    if (std::get<0>(x) != std::get<0>(y))
      return std::get<0>(x) < std::get<0>(y);
    if (std::get<1>(x) != std::get<1>(y))
      return std::get<1>(x) < std::get<1>(y);
    return std::tie(std::get<2>(x), std::get<3>(x)) > std::tie(std::get<2>(y), std::get<3>(y));
  };
  std::vector<entry> served;
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto& p = pairs[i];
    if (p.circuits > 0)
      served.emplace_back(pair_time(p.ab, p.ba, p.circuits, link_bytes_per_s),
                          std::max(p.ab, p.ba), p.a, p.b, i);
  }
  std::priority_queue<entry, std::vector<entry>, decltype(less)> heap{less, std::move(served)};
  while (!heap.empty()) {
    auto [t, dir, a, b, i] = heap.top();
    heap.pop();
    if (out.free_ports[a] == 0 || out.free_ports[b] == 0)
      continue;
    auto& p = pairs[i];
    serve(p);
    heap.emplace(pair_time(p.ab, p.ba, p.circuits, link_bytes_per_s), dir, a, b, i);
  }
}

} // namespace

allocation allocate_circuits(const std::vector<uint32_t>& ports,
                             const std::vector<demand>& demands, double link_bytes_per_s,
                             const std::function<bool(uint32_t, uint32_t)>& eligible) {
  auto pairs = demanded_pairs(ports.size(), demands, eligible);
  allocation out;
  out.free_ports = ports;
  auto serve = [&](pair_state& p) {
    ++p.circuits;
    --out.free_ports[p.a];
    --out.free_ports[p.b];
    ++out.steps;
  };
  serve_uncovered(pairs, out, serve);
  serve_slowest(pairs, out, link_bytes_per_s, serve);
  for (auto& p : pairs)
    if (p.circuits > 0)
      out.circuits.push_back({p.a, p.b, p.circuits});
  std::sort(out.circuits.begin(), out.circuits.end(),
            [](auto& x, auto& y) { return std::tie(x.a, x.b) < std::tie(y.a, y.b); });
  return out;
}

allocation allocate_uniform(const std::vector<uint32_t>& ports, const std::vector<demand>& demands,
                            const std::function<bool(uint32_t, uint32_t)>& eligible) {
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  for (auto& d : demands) {
    if (d.from == d.to || d.bytes <= 0 || d.from >= ports.size() || d.to >= ports.size())
      continue;
    auto key = std::minmax(d.from, d.to);
    if (!eligible || eligible(key.first, key.second))
      pairs.emplace_back(key.first, key.second);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  allocation out;
  out.free_ports = ports;
  std::vector<uint32_t> circuits(pairs.size(), 0);
  for (bool added = true; added;) {
    added = false;
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [a, b] = pairs[i];
      if (out.free_ports[a] == 0 || out.free_ports[b] == 0)
        continue;
      --out.free_ports[a];
      --out.free_ports[b];
      ++circuits[i];
      ++out.steps;
      added = true;
    }
  }
  for (size_t i = 0; i < pairs.size(); ++i)
    if (circuits[i] > 0)
      out.circuits.push_back({pairs[i].first, pairs[i].second, circuits[i]});
  return out;
}

} // namespace loom
