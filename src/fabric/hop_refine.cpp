#include "fabric/hop_refine.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

namespace loom {

namespace {

/// congestion() for one demand over many circuit graphs: the demand grouped by destination
/// once, the buffers kept between calls.
class congestion_meter {
public:
  congestion_meter(uint32_t n, const std::vector<demand>& demands, double link_bytes_per_s)
    : n_(n), link_(link_bytes_per_s), offset_(n + 1), hops_end_(n), closer_(n), dist_(n),
      carried_(n) {
    std::map<uint32_t, std::vector<std::pair<uint32_t, double>>> by_dest;
    for (auto& d : demands)
      if (d.from != d.to && d.bytes > 0 && d.from < n && d.to < n)
        by_dest[d.to].emplace_back(d.from, d.bytes);
    dests_.assign(by_dest.begin(), by_dest.end());
  }

  /// Arcs scanned so far: what bounds the refinement's time.
  uint64_t work() const { return work_; }

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

  /// The circuits as a symmetric adjacency in one flat array (offset_[v] .. offset_[v + 1]).
  void build(const std::vector<circuit_count>& circuits) {
    std::fill(offset_.begin(), offset_.end(), 0);
    for (auto& c : circuits) {
      ++offset_[c.a + 1];
      ++offset_[c.b + 1];
    }
    for (uint32_t v = 0; v < n_; ++v)
      offset_[v + 1] += offset_[v];
    arcs_.resize(offset_[n_]);
    hops_.resize(offset_[n_]);
    auto next = offset_;
    for (uint32_t k = 0; k < circuits.size(); ++k) {
      auto& c = circuits[k];
      arcs_[next[c.a]++] = {c.b, 2 * k, c.circuits};
      arcs_[next[c.b]++] = {c.a, 2 * k + 1, c.circuits};
    }
  }

  /// Routes every source's bytes to `t`; returns how many sources cannot reach it. The BFS
  /// from `t` also lists each endpoint's next hops (its arcs one step closer), so routing
  /// reads those alone instead of scanning every arc twice more.
  uint32_t route_to(uint32_t t, const std::vector<std::pair<uint32_t, double>>& sources) {
    std::fill(dist_.begin(), dist_.end(), far);
    order_.clear();
    dist_[t] = 0;
    order_.push_back(t);
    work_ += arcs_.size();
    for (size_t i = 0; i < order_.size(); ++i) {
      const auto u = order_[i];
      for (auto a = offset_[u]; a < offset_[u + 1]; ++a) {
        const auto w = arcs_[a].to;
        if (dist_[w] == far) {
          dist_[w] = dist_[u] + 1;
          order_.push_back(w);
          hops_end_[w] = offset_[w];
          closer_[w] = 0;
        }
        if (dist_[w] == dist_[u] + 1) { // u is one of w's next hops: the arc reversed
          hops_[hops_end_[w]++] = {u, arcs_[a].link ^ 1, arcs_[a].circuits};
          closer_[w] += arcs_[a].circuits;
        }
      }
    }
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
      work_ += 2 * (offset_[v + 1] - offset_[v]); // what scanning v's arcs twice cost
      for (auto h = offset_[v]; h < hops_end_[v]; ++h) {
        const double share = carried_[v] * hops_[h].circuits / closer_[v];
        load_[hops_[h].link] += share;
        carried_[hops_[h].to] += share;
      }
    }
    return unreachable;
  }

  uint32_t n_;
  double link_;
  std::vector<std::pair<uint32_t, std::vector<std::pair<uint32_t, double>>>> dests_;
  std::vector<uint32_t> offset_;
  std::vector<arc> arcs_;
  std::vector<arc> hops_;          // v's next hops to the current destination, from offset_[v]
  std::vector<uint32_t> hops_end_; // where they end
  std::vector<uint32_t> closer_;   // their circuits
  std::vector<uint32_t> dist_, order_;
  std::vector<double> carried_, load_;
  uint64_t work_ = 0;
};

} // namespace

hop_congestion congestion(uint32_t n, const std::vector<circuit_count>& circuits,
                          const std::vector<demand>& demands, double link_bytes_per_s) {
  return congestion_meter{n, demands, link_bytes_per_s}(circuits);
}

namespace {

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

/// One entry per circuit, in the circuits' order.
std::vector<edge> unit_edges(const std::vector<circuit_count>& circuits) {
  std::vector<edge> edges;
  for (auto& c : circuits)
    for (uint32_t k = 0; k < c.circuits; ++k)
      edges.emplace_back(c.a, c.b);
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

std::vector<circuit_count> counted(std::vector<edge> edges) {
  std::sort(edges.begin(), edges.end());
  std::vector<circuit_count> out;
  for (auto [a, b] : edges)
    if (!out.empty() && out.back().a == a && out.back().b == b)
      ++out.back().circuits;
    else
      out.push_back({a, b, 1});
  return out;
}

/// The refinement's work budget (congestion_meter::work()): about 22 ms on a 64-ToR PoD.
constexpr uint64_t max_work = 8'000'000;

} // namespace

std::vector<circuit_count> refine_for_hops(uint32_t n, std::vector<circuit_count> circuits,
                                           const std::vector<demand>& demands,
                                           double link_bytes_per_s,
                                           const std::function<bool(uint32_t, uint32_t)>& eligible) {
  auto edges = unit_edges(circuits);
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
