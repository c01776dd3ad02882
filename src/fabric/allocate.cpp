#include "fabric/allocate.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <unordered_map>
#include <queue>
#include <tuple>

#include <sys/mman.h>

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
  double demand; // max(ab, ba)
  double ab;
  double ba;
  uint32_t a;
  uint32_t b;
};

bool ranks_before(const candidate& x, const candidate& y) {
  if (x.demand != y.demand)
    return x.demand > y.demand;
  return tie_rank(x.a, x.b) < tie_rank(y.a, y.b);
}

/// The endpoints with a free port, in order.
std::vector<uint32_t> open_endpoints(const std::vector<uint32_t>& free) {
  std::vector<uint32_t> open;
  for (uint32_t v = 0; v < free.size(); ++v)
    if (free[v] > 0)
      open.push_back(v);
  return open;
}

/// A zero-filled array of doubles; a large one straight from the kernel, in huge pages where
/// it allows: a dense matrix of 2,048 endpoints is 32 MB, and faulting it in 4 KiB pages cost
/// more than filling it.
class zeroed_doubles {
public:
  explicit zeroed_doubles(size_t count) : bytes_(count * sizeof(double)) {
    if (bytes_ < huge) {
      small_.assign(count, 0.0);
      data_ = small_.data();
      return;
    }
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      throw std::bad_alloc{};
    madvise(p, bytes_, MADV_HUGEPAGE); // advice only: 4 KiB pages if refused
    data_ = static_cast<double*>(p);
  }
  zeroed_doubles(const zeroed_doubles&) = delete;
  zeroed_doubles& operator=(const zeroed_doubles&) = delete;
  ~zeroed_doubles() {
    if (bytes_ >= huge)
      munmap(data_, bytes_);
  }
  double& operator[](size_t i) { return data_[i]; }
  const double* data() const { return data_; }

private:
  static constexpr size_t huge = size_t{2} << 20;
  size_t bytes_;
  std::vector<double> small_;
  double* data_;
};

/// The directed demands summed per undirected eligible pair: in an n x n matrix when demand is
/// dense (rows filled in the demands' order), as a list of pairs when it is sparse. Phase 1
/// reads the pairs that can still be served (both ends with a free port), so as endpoints
/// fill, the dense passes read only the rows and columns of the open ones.
class pair_demands {
public:
  pair_demands(size_t n, const std::vector<demand>& demands,
               const std::function<bool(uint32_t, uint32_t)>& eligible)
      : n_(n), dense_(n <= 4096 && demands.size() >= n * n / 16), eligible_(eligible) {
    if (dense_) {
      matrix_ = std::make_unique<zeroed_doubles>(n * n);
      auto& matrix = *matrix_;
      for (auto& d : demands)
        if (valid(d))
          matrix[size_t(d.from) * n + d.to] += d.bytes;
      return;
    }
    std::unordered_map<uint64_t, std::pair<double, double>> both;
    both.reserve(demands.size());
    for (auto& d : demands) {
      if (!valid(d))
        continue;
      auto key = std::minmax(d.from, d.to);
      auto& ab = both[uint64_t{key.first} << 32 | key.second];
      (d.from == key.first ? ab.first : ab.second) += d.bytes;
    }
    sparse_.reserve(both.size());
    for (auto& [key, ab] : both)
      add(uint32_t(key >> 32), uint32_t(key), ab.first, ab.second,
          [&](const candidate& c) { sparse_.push_back(c); });
  }

  /// Calls `f` with every demanded eligible pair whose ends both have a free port and whose
  /// larger directional demand is within [lo, hi]. `step` visits every step-th open
  /// endpoint's pairs with every step-th other (a sample); returns how many pairs it looked at.
  template <class F>
  size_t each_open(const std::vector<uint32_t>& free, F&& f, size_t step = 1, double lo = 0,
                   double hi = std::numeric_limits<double>::infinity()) const {
    auto within = [&](double ab, double ba) {
      const double key = std::max(ab, ba);
      return key >= lo && key <= hi;
    };
    size_t seen = 0;
    if (!dense_) {
      for (size_t i = 0; i < sparse_.size(); i += step, ++seen) {
        const auto& c = sparse_[i];
        if (free[c.a] > 0 && free[c.b] > 0 && within(c.ab, c.ba))
          f(c);
      }
      return seen;
    }
    const auto open = open_endpoints(free);
    return open.size() == n_ ? each_pair(open.size(), [](size_t i) { return uint32_t(i); }, f,
                                         step, within)
                             : each_pair(open.size(), [&](size_t i) { return open[i]; }, f,
                                         step, within);
  }

  /// each_open's dense half over the endpoints endpoint(0 .. m - 1).
  template <class E, class F, class W>
  size_t each_pair(size_t m, E&& endpoint, F&& f, size_t step, W&& within) const {
    size_t seen = 0;
    const double* matrix = matrix_->data();
    // Tiles of the upper triangle, so both directions of a pair come from cache.
    const size_t tile = 64 * step;
    for (size_t ti = 0; ti < m; ti += tile)
      for (size_t tj = ti; tj < m; tj += tile)
        for (size_t i = ti; i < std::min(m, ti + tile); i += step) {
          const uint32_t a = endpoint(i);
          const double* row = matrix + size_t(a) * n_;
          for (size_t j = std::max(i + step, tj); j < std::min(m, tj + tile); j += step, ++seen) {
            const uint32_t b = endpoint(j);
            const double ab = row[b], ba = matrix[size_t(b) * n_ + a];
            if (within(ab, ba))
              add(a, b, ab, ba, f);
          }
        }
    return seen;
  }

  /// How many pairs each_open(free, f, 1) looks at.
  size_t open_pairs(const std::vector<uint32_t>& free) const {
    if (!dense_)
      return sparse_.size();
    const size_t m = open_endpoints(free).size();
    return m * (m - (m > 0)) / 2;
  }

private:
  bool valid(const demand& d) const {
    return d.from != d.to && d.bytes > 0 && d.from < n_ && d.to < n_;
  }

  template <class F>
  void add(uint32_t a, uint32_t b, double ab, double ba, F&& f) const {
    if (ab + ba > 0 && (!eligible_ || eligible_(a, b)))
      f(candidate{std::max(ab, ba), ab, ba, a, b});
  }

  size_t n_;
  bool dense_;
  const std::function<bool(uint32_t, uint32_t)>& eligible_;
  std::unique_ptr<zeroed_doubles> matrix_;
  std::vector<candidate> sparse_;
};

/// Sorts by the first member: a few keys by comparison, many by radix (least significant 16
/// bits first, a pass per 16 bits that differ among the keys).
void radix_sort(std::vector<std::pair<uint64_t, uint32_t>>& keys) {
  if (keys.size() < 8192) {
    std::sort(keys.begin(), keys.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    return;
  }
  uint64_t differ = 0;
  for (auto& k : keys)
    differ |= k.first ^ keys.front().first;
  std::vector<std::pair<uint64_t, uint32_t>> spare(keys.size());
  for (int shift = 0; shift < 64; shift += 16) {
    if ((differ >> shift & 0xffff) == 0)
      continue;
    std::vector<uint32_t> count(65537, 0);
    for (auto& k : keys)
      ++count[(k.first >> shift & 0xffff) + 1];
    for (size_t d = 0; d < 65536; ++d)
      count[d + 1] += count[d];
    for (auto& k : keys)
      spare[count[k.first >> shift & 0xffff]++] = k;
    keys.swap(spare);
  }
}

/// Pairs, and the order they rank in: order[k].second is the k-th's index in `pairs`.
struct ranked {
  std::vector<candidate> pairs;
  std::vector<std::pair<uint64_t, uint32_t>> order;
};

/// The pairs still to serve that rank at or after `after` and before `before` (unbounded
/// where absent), ranked.
ranked band(const pair_demands& table, const std::vector<uint32_t>& free,
            const std::optional<candidate>& after, const std::optional<candidate>& before) {
  std::vector<candidate> in;
  table.each_open(free, [&](const candidate& c) {
    if ((!after || !ranks_before(c, *after)) && (!before || ranks_before(c, *before)))
      in.push_back(c);
  }, 1, before ? before->demand : 0,
     after ? after->demand : std::numeric_limits<double>::infinity());
  // Sorted as keys, not as candidates: a positive double's bits order as it does, so the
  // larger demand first is the smaller complement; then runs of equal demand by tie_rank.
  std::vector<std::pair<uint64_t, uint32_t>> keys(in.size());
  for (uint32_t i = 0; i < in.size(); ++i)
    keys[i] = {~std::bit_cast<uint64_t>(in[i].demand), i};
  radix_sort(keys);
  auto tie = [&](const auto& k) { return tie_rank(in[k.second].a, in[k.second].b); };
  for (size_t begin = 0, end = 0; begin < keys.size(); begin = end) {
    while (end < keys.size() && keys[end].first == keys[begin].first)
      ++end;
    if (end - begin > 1)
      std::sort(keys.begin() + long(begin), keys.begin() + long(end),
                [&](const auto& x, const auto& y) { return tie(x) < tie(y); });
  }
  return {std::move(in), std::move(keys)};
}

/// A pair about `count` of the pairs still to serve at or after `after` rank before, from an
/// evenly spread sample of them; none if there are hardly more than `count`.
std::optional<candidate> band_end(const pair_demands& table, const std::vector<uint32_t>& free,
                                  const std::optional<candidate>& after, size_t count) {
  const size_t pairs = table.open_pairs(free);
  const auto m = double(pairs);
  const size_t step = std::max<size_t>(1, size_t(std::sqrt(m / 4096)));
  std::vector<candidate> sample;
  const size_t seen = table.each_open(free, [&](const candidate& c) {
    if (!after || !ranks_before(c, *after))
      sample.push_back(c);
  }, step, 0, after ? after->demand : std::numeric_limits<double>::infinity());
  const auto at = size_t(double(count) * double(seen) / std::max(1.0, m));
  if (at >= sample.size())
    return std::nullopt;
  std::nth_element(sample.begin(), sample.begin() + long(at), sample.end(), ranks_before);
  return sample[at];
}

/// Phase 1: while any demanded pair has no circuit, Alg. 3 picks among those (T = inf), largest
/// directional demand first; their order never changes, so one ordered pass gives exactly the
/// same choices as the argmax loop. Far fewer pairs are served than demanded (an endpoint has a
/// few ports), so the order is made a band at a time (band_end, then band), pairs with a full
/// endpoint are never read again, and the pass ends once fewer than two endpoints have a free
/// port. Returns the pairs served, with one circuit each.
std::vector<pair_state> serve_uncovered(const pair_demands& table, allocation& out) {
  std::vector<pair_state> served;
  auto& free = out.free_ports;
  size_t open = 0;
  uint64_t ports = 0;
  for (auto p : free) {
    open += p > 0;
    ports += p;
  }
  served.reserve(ports / 2);
  std::optional<candidate> after;
  // A band as large as the pairs the free ports could still take, doubled each time one runs
  // out first (pairs skipped for an endpoint that filled meanwhile).
  for (size_t wider = 1; open >= 2; wider *= 2) {
    const size_t chunk = std::max<uint64_t>(1024, ports / 2) * wider;
    const auto before = band_end(table, free, after, chunk);
    const auto next = band(table, free, after, before);
    for (auto& k : next.order) {
      const auto& c = next.pairs[k.second];
      if (open < 2)
        break;
      if (free[c.a] == 0 || free[c.b] == 0)
        continue;
      served.push_back({c.a, c.b, c.ab, c.ba, 1});
      open -= (--free[c.a] == 0) + (--free[c.b] == 0);
      ports -= 2;
      ++out.steps;
    }
    if (!before)
      break; // every pair was in that band
    after = before;
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
  auto& free = out.free_ports;
  std::vector<entry> entries;
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto& p = pairs[i];
    if (free[p.a] == 0 || free[p.b] == 0)
      continue; // ports never come back
    entries.emplace_back(pair_time(p.ab, p.ba, p.circuits, link_bytes_per_s),
                         std::max(p.ab, p.ba), p.a, p.b, i);
  }
  std::priority_queue<entry, std::vector<entry>, decltype(less)> heap{less, std::move(entries)};
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
  auto pairs = serve_uncovered(table, out);
  serve_slowest(pairs, out, link_bytes_per_s);
  // By (a, b): counted by b, then stably by a.
  std::vector<circuit_count> by_b(pairs.size());
  out.circuits.resize(pairs.size());
  auto count_by = [&](auto&& from, auto&& to, auto key) {
    std::vector<uint32_t> at(ports.size() + 1, 0);
    for (auto& c : from)
      ++at[key(c) + 1];
    for (size_t v = 0; v < ports.size(); ++v)
      at[v + 1] += at[v];
    for (auto& c : from)
      to[at[key(c)]++] = {c.a, c.b, c.circuits};
  };
  count_by(pairs, by_b, [](auto& c) { return c.b; });
  count_by(by_b, out.circuits, [](auto& c) { return c.a; });
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
