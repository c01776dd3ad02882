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

/// SplitMix64's finaliser: a fixed, well-spread permutation of 64-bit keys.
uint64_t scramble(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The order among pairs that tie on everything else: a fixed scramble, so that ties do not
/// make the low-numbered switches spend their ports on each other.
uint64_t tie_rank(uint32_t a, uint32_t b) {
  return scramble(uint64_t{a} << 32 | b);
}

/// An undirected pair with demand both ways and the circuits it has so far.
struct pair_state {
  uint32_t a;
  uint32_t b;
  double ab = 0;
  double ba = 0;
  uint32_t circuits = 0;
};

/// A demanded pair as phase 1 ranks it: its larger directional demand, then the pair.
struct candidate {
  double demand;
  uint32_t a;
  uint32_t b;
};

bool ranks_before(const candidate& x, const candidate& y) {
  if (x.demand != y.demand)
    return x.demand > y.demand;
  return tie_rank(x.a, x.b) < tie_rank(y.a, y.b);
}

/// The directed demands summed per undirected eligible pair: in an n x n matrix when demand is
/// dense (rows filled in the demands' order, the transpose read tile by tile so that both
/// directions of a pair come from cache), in a hash map when it is sparse.
class pair_demands {
public:
  pair_demands(size_t n, const std::vector<demand>& demands,
               const std::function<bool(uint32_t, uint32_t)>& eligible)
      : n_(n), dense_(n <= 4096 && demands.size() >= n * n / 16), eligible_(eligible) {
    if (dense_)
      matrix_.assign(n * n, 0.0);
    else
      sparse_.reserve(demands.size());
    for (auto& d : demands) {
      if (d.from == d.to || d.bytes <= 0 || d.from >= n || d.to >= n)
        continue;
      if (dense_) {
        matrix_[size_t(d.from) * n + d.to] += d.bytes;
        continue;
      }
      auto key = std::minmax(d.from, d.to);
      auto& both = sparse_[uint64_t{key.first} << 32 | key.second];
      (d.from == key.first ? both.first : both.second) += d.bytes;
    }
  }

  /// Every demanded eligible pair, in no particular order.
  std::vector<candidate> candidates() const {
    std::vector<candidate> out;
    auto add = [&](uint32_t a, uint32_t b, double ab, double ba) {
      if (ab + ba > 0 && (!eligible_ || eligible_(a, b)))
        out.push_back({std::max(ab, ba), a, b});
    };
    if (!dense_) {
      out.reserve(sparse_.size());
      for (auto& [key, both] : sparse_)
        add(uint32_t(key >> 32), uint32_t(key), both.first, both.second);
      return out;
    }
    out.reserve(n_ * (n_ - 1) / 2);
    constexpr size_t tile = 64;
    for (size_t ta = 0; ta < n_; ta += tile)
      for (size_t tb = ta; tb < n_; tb += tile)
        for (size_t a = ta; a < std::min(n_, ta + tile); ++a)
          for (size_t b = std::max(a + 1, tb); b < std::min(n_, tb + tile); ++b)
            add(uint32_t(a), uint32_t(b), matrix_[a * n_ + b], matrix_[b * n_ + a]);
    return out;
  }

  /// Demand a -> b and b -> a.
  std::pair<double, double> between(uint32_t a, uint32_t b) const {
    if (dense_)
      return {matrix_[size_t(a) * n_ + b], matrix_[size_t(b) * n_ + a]};
    return sparse_.at(uint64_t{a} << 32 | b);
  }

private:
  size_t n_;
  bool dense_;
  const std::function<bool(uint32_t, uint32_t)>& eligible_;
  std::vector<double> matrix_;
  std::unordered_map<uint64_t, std::pair<double, double>> sparse_;
};

/// Moves about the `count` first-ranked candidates to the front (every one there ranks before
/// every one after) and returns where they end: one partition around a pivot drawn from an
/// evenly spaced sample, which costs a pass where nth_element costs several.
std::vector<candidate>::iterator first_ranked(std::vector<candidate>& order, size_t count) {
  if (count >= order.size())
    return order.end();
  const size_t stride = std::max<size_t>(1, order.size() / 4096);
  std::vector<candidate> sample;
  for (size_t i = 0; i < order.size(); i += stride)
    sample.push_back(order[i]);
  const size_t at = std::min(sample.size() - 1, count / stride);
  std::nth_element(sample.begin(), sample.begin() + long(at), sample.end(), ranks_before);
  const auto pivot = sample[at];
  auto end = std::partition(order.begin(), order.end(),
                            [&](const candidate& c) { return ranks_before(c, pivot); });
  if (end == order.begin()) { // the pivot ranks first: take exactly `count`
    end = order.begin() + long(count);
    std::nth_element(order.begin(), end, order.end(), ranks_before);
  }
  return end;
}

/// Phase 1: while any demanded pair has no circuit, Alg. 3 picks among those (T = inf), largest
/// directional demand first; their order never changes, so one ordered pass gives exactly the
/// same choices as the argmax loop. Far fewer pairs are served than demanded (an endpoint has a
/// few ports), so the order is made a chunk at a time (first_ranked, then a sort of the chunk),
/// pairs with a full endpoint are dropped between chunks, and the pass ends once fewer than two
/// endpoints have a free port. Returns the pairs served, with one circuit each.
std::vector<pair_state> serve_uncovered(std::vector<candidate> order, const pair_demands& table,
                                        allocation& out) {
  std::vector<pair_state> served;
  auto& free = out.free_ports;
  size_t open = 0;
  uint64_t ports = 0;
  for (auto p : free) {
    open += p > 0;
    ports += p;
  }
  auto full = [&](const candidate& c) { return free[c.a] == 0 || free[c.b] == 0; };
  for (size_t chunk = std::max<size_t>(1024, ports / 2); !order.empty() && open >= 2;
       chunk *= 2) {
    const auto end = first_ranked(order, chunk);
    std::sort(order.begin(), end, ranks_before);
    for (auto it = order.begin(); it != end && open >= 2; ++it) {
      if (full(*it))
        continue;
      auto [ab, ba] = table.between(it->a, it->b);
      served.push_back({it->a, it->b, ab, ba, 1});
      open -= (--free[it->a] == 0) + (--free[it->b] == 0);
      ++out.steps;
    }
    // What is left of the order, without pairs that can no longer be served, in one pass.
    auto kept = std::copy_if(end, order.end(), order.begin(), [&](auto& c) { return !full(c); });
    order.erase(kept, order.end());
  }
  return served;
}

/// Phase 2: pairs with circuits, by finite T_pair on a max-heap; ties by directional demand,
/// then tie_rank. A pair whose endpoint has run out of ports drops out for good.
void serve_slowest(std::vector<pair_state>& pairs, allocation& out, double link_bytes_per_s) {
  using entry = std::tuple<double, double, uint32_t, uint32_t, size_t>;
  auto less = [](const entry& x, const entry& y) {
    if (std::get<0>(x) != std::get<0>(y))
      return std::get<0>(x) < std::get<0>(y);
    if (std::get<1>(x) != std::get<1>(y))
      return std::get<1>(x) < std::get<1>(y);
    return tie_rank(std::get<2>(x), std::get<3>(x)) > tie_rank(std::get<2>(y), std::get<3>(y));
  };
  std::vector<entry> entries;
  entries.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto& p = pairs[i];
    entries.emplace_back(pair_time(p.ab, p.ba, p.circuits, link_bytes_per_s),
                         std::max(p.ab, p.ba), p.a, p.b, i);
  }
  std::priority_queue<entry, std::vector<entry>, decltype(less)> heap{less, std::move(entries)};
  auto& free = out.free_ports;
  while (!heap.empty()) {
    auto [t, dir, a, b, i] = heap.top();
    heap.pop();
    if (free[a] == 0 || free[b] == 0)
      continue;
    auto& p = pairs[i];
    ++p.circuits;
    --free[a];
    --free[b];
    ++out.steps;
    heap.emplace(pair_time(p.ab, p.ba, p.circuits, link_bytes_per_s), dir, a, b, i);
  }
}

} // namespace

allocation allocate_circuits(const std::vector<uint32_t>& ports,
                             const std::vector<demand>& demands, double link_bytes_per_s,
                             const std::function<bool(uint32_t, uint32_t)>& eligible) {
  pair_demands table{ports.size(), demands, eligible};
  allocation out;
  out.free_ports = ports;
  auto pairs = serve_uncovered(table.candidates(), table, out);
  serve_slowest(pairs, out, link_bytes_per_s);
  for (auto& p : pairs)
    out.circuits.push_back({p.a, p.b, p.circuits});
  std::sort(out.circuits.begin(), out.circuits.end(),
            [](auto& x, auto& y) { return std::tie(x.a, x.b) < std::tie(y.a, y.b); });
  return out;
}

allocation allocate_uniform(const std::vector<uint32_t>& ports, const std::vector<demand>& demands,
                            const std::function<bool(uint32_t, uint32_t)>& eligible,
                            bool demanded_only) {
  const auto n = uint32_t(ports.size());
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  auto take = [&](uint32_t a, uint32_t b) {
    if (!eligible || eligible(a, b))
      pairs.emplace_back(a, b);
  };
  if (demanded_only) {
    for (auto& d : demands)
      if (d.from != d.to && d.bytes > 0 && d.from < n && d.to < n)
        take(std::min(d.from, d.to), std::max(d.from, d.to));
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  } else {
    for (uint32_t a = 0; a < n; ++a)
      for (uint32_t b = a + 1; b < n; ++b)
        take(a, b);
  }
  allocation out;
  out.free_ports = ports;
  auto& free = out.free_ports;
  // Lazy min-heap on (circuits, ports used at the busier end, at the other end, a fixed
  // scramble of the pair): keys only grow, so a popped entry whose key grew goes back with its
  // current one. The scramble breaks ties without favouring low-numbered switches, so the
  // circuits form a random-like regular graph (a good expander) rather than cliques.
  using key = std::tuple<uint32_t, uint32_t, uint32_t, uint64_t, uint32_t>;
  auto key_of = [&](uint32_t i, uint32_t circuits) {
    auto [a, b] = pairs[i];
    auto used_a = ports[a] - free[a], used_b = ports[b] - free[b];
    return key{circuits, std::max(used_a, used_b), std::min(used_a, used_b),
               tie_rank(a, b), i};
  };
  std::vector<uint32_t> circuits(pairs.size(), 0);
  std::priority_queue<key, std::vector<key>, std::greater<>> heap;
  for (uint32_t i = 0; i < pairs.size(); ++i)
    heap.push(key_of(i, 0));
  while (!heap.empty()) {
    auto top = heap.top();
    heap.pop();
    const auto i = std::get<4>(top);
    auto [a, b] = pairs[i];
    if (free[a] == 0 || free[b] == 0)
      continue; // for good: ports never come back
    if (auto now = key_of(i, circuits[i]); now > top) {
      heap.push(now);
      continue;
    }
    --free[a];
    --free[b];
    ++out.steps;
    heap.push(key_of(i, ++circuits[i]));
  }
  for (size_t i = 0; i < pairs.size(); ++i)
    if (circuits[i] > 0)
      out.circuits.push_back({pairs[i].first, pairs[i].second, circuits[i]});
  return out;
}

} // namespace loom
