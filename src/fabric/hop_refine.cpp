#include "fabric/hop_refine.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <utility>

namespace loom {

namespace {

/// congestion() for one demand over many circuit graphs: the demand grouped by destination
/// once, the buffers kept between calls. The graph is held as neighbour bitsets, so a BFS
/// costs n words per level sweep instead of a scan of every arc, and an endpoint's next hops
/// are one AND with the level closer to the destination.
class congestion_meter {
public:
  congestion_meter(uint32_t n, const std::vector<demand>& demands, double link_bytes_per_s)
    : n_(n), words_((n + 63) / 64), link_(link_bytes_per_s), offset_(n + 1), dist_(n),
      carried_(n), adj_(size_t(n) * words_), rank_(size_t(n) * words_),
      levels_(size_t(n + 1) * words_), visited_(words_) {
    std::map<uint32_t, std::vector<std::pair<uint32_t, double>>> by_dest;
    for (auto& d : demands)
      if (d.from != d.to && d.bytes > 0 && d.from < n && d.to < n)
        by_dest[d.to].emplace_back(d.from, d.bytes);
    dests_.assign(by_dest.begin(), by_dest.end());
  }

  /// Arcs scanned so far by a plain adjacency-list BFS and ECMP pass (the measure the
  /// refinement's budget was set in, kept so its stopping point does not move).
  uint64_t work() const { return work_; }

  /// `circuits` as counted() gives them: sorted by (a, b), a < b, each pair once, no loops.
  hop_congestion operator()(const std::vector<circuit_count>& circuits) {
    build(circuits);
    load_.assign(2 * circuits.size(), 0.0);
    hop_congestion out;
    for (auto& [t, sources] : dests_)
      out.unreachable += route_to(t, sources);
    for (uint32_t l = 0; l < load_.size(); ++l) {
      const double s = load_[l] / (circuits[l / 2].circuits * link_);
      out.worst_s = std::max(out.worst_s, s);
      out.spread += s * s;
    }
    return out;
  }

private:
  struct arc {
    uint32_t to;
    uint32_t link;     // direction 2k is circuits[k].a -> b, 2k + 1 the reverse
    uint32_t circuits; // the circuit's multiplicity
  };
  static constexpr uint32_t far = std::numeric_limits<uint32_t>::max();

  /// The circuits as a symmetric adjacency: arcs in one flat array (offset_[v] ..
  /// offset_[v + 1]) sorted by neighbour, as canonical circuits give them, and the same
  /// neighbours as bitsets, with rank_ counting v's neighbours in the words before each.
  void build(const std::vector<circuit_count>& circuits) {
    std::fill(offset_.begin(), offset_.end(), 0);
    std::fill(adj_.begin(), adj_.end(), 0);
    for (auto& c : circuits) {
      ++offset_[c.a + 1];
      ++offset_[c.b + 1];
      adj_[size_t(c.a) * words_ + c.b / 64] |= bit(c.b);
      adj_[size_t(c.b) * words_ + c.a / 64] |= bit(c.a);
    }
    for (uint32_t v = 0; v < n_; ++v) {
      offset_[v + 1] += offset_[v];
      uint32_t before = 0;
      for (uint32_t w = 0; w < words_; ++w) {
        rank_[size_t(v) * words_ + w] = before;
        before += uint32_t(std::popcount(adj_[size_t(v) * words_ + w]));
      }
    }
    arcs_.resize(offset_[n_]);
    auto next = offset_;
    for (uint32_t k = 0; k < circuits.size(); ++k) {
      auto& c = circuits[k];
      arcs_[next[c.a]++] = {c.b, 2 * k, c.circuits};
      arcs_[next[c.b]++] = {c.a, 2 * k + 1, c.circuits};
    }
  }

  static uint64_t bit(uint32_t v) { return uint64_t{1} << (v % 64); }

  /// v's arc to its neighbour u.
  const arc& arc_to(uint32_t v, uint32_t u) const {
    const auto w = size_t(v) * words_ + u / 64;
    return arcs_[offset_[v] + rank_[w] + uint32_t(std::popcount(adj_[w] & (bit(u) - 1)))];
  }

  /// Breadth first from t, neighbours in increasing order (the order of a scan of the
  /// sorted arcs); levels_ holds each distance's endpoints.
  void bfs(uint32_t t) {
    std::fill(dist_.begin(), dist_.end(), far);
    std::fill(visited_.begin(), visited_.end(), 0);
    order_.clear();
    dist_[t] = 0;
    order_.push_back(t);
    visited_[t / 64] |= bit(t);
    std::fill_n(levels_.begin(), words_, 0);
    levels_[t / 64] |= bit(t);
    uint32_t deepest = 0;
    for (size_t i = 0; i < order_.size(); ++i) {
      const auto u = order_[i];
      const auto d = dist_[u] + 1;
      if (d > deepest) { // level d starts
        std::fill_n(levels_.begin() + size_t(d) * words_, words_, 0);
        deepest = d;
      }
      for (uint32_t w = 0; w < words_; ++w) {
        uint64_t fresh = adj_[size_t(u) * words_ + w] & ~visited_[w];
        visited_[w] |= fresh;
        levels_[size_t(d) * words_ + w] |= fresh;
        for (; fresh; fresh &= fresh - 1) {
          const auto v = w * 64 + uint32_t(std::countr_zero(fresh));
          dist_[v] = d;
          order_.push_back(v);
        }
      }
    }
  }

  /// Routes every source's bytes to `t`; returns how many sources cannot reach it.
  uint32_t route_to(uint32_t t, const std::vector<std::pair<uint32_t, double>>& sources) {
    bfs(t);
    work_ += arcs_.size();
    std::fill(carried_.begin(), carried_.end(), 0.0);
    uint32_t unreachable = 0;
    for (auto [s, bytes] : sources) {
      if (dist_[s] == far)
        ++unreachable;
      else
        carried_[s] += bytes;
    }
    // Farthest first: an endpoint passes all it carries (its own and transit) one hop closer,
    // over its next hops in proportion to their circuits (each circuit a port of the ToR's
    // ECMP group), as a switch forwards hop by hop.
    for (auto it = order_.rbegin(); it != order_.rend() && *it != t; ++it) {
      const auto v = *it;
      if (carried_[v] == 0)
        continue;
      work_ += 2 * (offset_[v + 1] - offset_[v]); // what scanning v's arcs twice would cost
      const auto* closer_level = &levels_[size_t(dist_[v] - 1) * words_];
      const auto* mine = &adj_[size_t(v) * words_];
      uint32_t closer = 0;
      hops_.clear();
      for (uint32_t w = 0; w < words_; ++w)
        for (uint64_t m = mine[w] & closer_level[w]; m; m &= m - 1) {
          hops_.push_back(&arc_to(v, w * 64 + uint32_t(std::countr_zero(m))));
          closer += hops_.back()->circuits;
        }
      for (auto* h : hops_) {
        const double share = carried_[v] * h->circuits / closer;
        load_[h->link] += share;
        carried_[h->to] += share;
      }
    }
    return unreachable;
  }

  uint32_t n_, words_;
  double link_;
  std::vector<std::pair<uint32_t, std::vector<std::pair<uint32_t, double>>>> dests_;
  std::vector<uint32_t> offset_;
  std::vector<arc> arcs_;
  std::vector<uint32_t> dist_, order_;
  std::vector<double> carried_, load_;
  std::vector<uint64_t> adj_;     // v's neighbours, words_ words from v * words_
  std::vector<uint32_t> rank_;    // v's neighbours in its words before each
  std::vector<uint64_t> levels_;  // the endpoints at distance d, words_ words from d * words_
  std::vector<uint64_t> visited_;
  std::vector<const arc*> hops_;  // the current endpoint's next hops
  uint64_t work_ = 0;
};

/// SplitMix64: a fixed stream, so the swaps tried depend only on the input.
struct splitmix {
  uint64_t state;
  uint64_t next() {
    uint64_t x = (state += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
};

using edge = std::pair<uint32_t, uint32_t>;

/// One entry per circuit, in the circuits' order, its lower end first.
std::vector<edge> unit_edges(const std::vector<circuit_count>& circuits) {
  std::vector<edge> edges;
  for (auto& c : circuits)
    edges.insert(edges.end(), c.circuits, std::minmax(c.a, c.b));
  return edges;
}

/// Edges i = a-b and j = c-d become a-c, b-d (`cross`) or a-d, b-c; empty if i and j are one
/// edge.
std::vector<edge> swapped(std::vector<edge> edges, size_t i, size_t j, bool cross) {
  if (i == j)
    return {};
  auto [a, b] = edges[i];
  auto [c, d] = edges[j];
  edge x = cross ? edge{a, c} : edge{a, d};
  edge y = cross ? edge{b, d} : edge{b, c};
  edges[i] = std::minmax(x.first, x.second);
  edges[j] = std::minmax(y.first, y.second);
  return edges;
}

/// The circuits as congestion_meter takes them (each pair once, a < b, sorted, no loops):
/// the circuits of one pair are one ECMP group however they were listed.
std::vector<circuit_count> counted(std::vector<edge> edges) {
  std::sort(edges.begin(), edges.end());
  std::vector<circuit_count> out;
  for (auto [a, b] : edges)
    if (a == b)
      continue;
    else if (!out.empty() && out.back().a == a && out.back().b == b)
      ++out.back().circuits;
    else
      out.push_back({a, b, 1});
  return out;
}

} // namespace

hop_congestion congestion(uint32_t n, const std::vector<circuit_count>& circuits,
                          const std::vector<demand>& demands, double link_bytes_per_s) {
  return congestion_meter{n, demands, link_bytes_per_s}(counted(unit_edges(circuits)));
}

namespace {

/// The refinement's work budget (congestion_meter::work()): about 22 ms on a 64-ToR PoD.
constexpr uint64_t max_work = 8'000'000;

} // namespace

std::vector<circuit_count> refine_for_hops(uint32_t n, std::vector<circuit_count> circuits,
                                           const std::vector<demand>& demands,
                                           double link_bytes_per_s,
                                           const std::function<bool(uint32_t, uint32_t)>& eligible) {
  auto edges = unit_edges(circuits); // in the input's order: the swaps tried follow it
  if (edges.size() < 2)
    return circuits;
  circuits = counted(edges);
  congestion_meter meter{n, demands, link_bytes_per_s};
  auto best = meter(circuits);
  if (best == hop_congestion{}) // nothing to carry
    return circuits;
  auto allowed = [&](uint32_t x, uint32_t y) { return x != y && (!eligible || eligible(x, y)); };
  splitmix rng{edges.size() * 0x100000001b3ULL + n};
  const uint64_t round = 32 * edges.size();
  for (uint64_t stale = 0; stale < round && meter.work() < max_work; ++stale) {
    const auto i = size_t(rng.next() % edges.size());
    const auto j = size_t(rng.next() % edges.size());
    auto tried = swapped(edges, i, j, rng.next() & 1);
    if (tried.empty() || !allowed(tried[i].first, tried[i].second)
        || !allowed(tried[j].first, tried[j].second))
      continue;
    auto candidate = counted(tried);
    auto score = meter(candidate);
    if (score < best) {
      best = score;
      circuits = std::move(candidate);
      edges = unit_edges(circuits);
      stale = 0;
    }
  }
  return circuits;
}

} // namespace loom
