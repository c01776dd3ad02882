#include "fabric/flow_model.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <numeric>

namespace loom {

uint32_t flow_network::add_link(double bytes_per_s) {
  capacity_.push_back(bytes_per_s);
  return uint32_t(capacity_.size() - 1);
}

namespace {

/// Max-min fair rates by progressive filling over a fixed set of flows, some of which finish
/// over time. Flow -> links and link -> flows are flat arrays built once (the latter compacted
/// when half its entries are finished flows), so each event of a collective solves again
/// without allocating; the rates change globally when a flow finishes, so each event solves
/// from scratch.
class max_min_solver {
public:
  max_min_solver(const std::vector<double>& capacity, const std::vector<flow_network::flow>& flows)
      : capacity_(capacity), flow_start_(flows.size() + 1, 0), count_(capacity.size(), 0),
        state_(flows.size(), 0), rate_(flows.size(), 0) {
    for (size_t f = 0; f < flows.size(); ++f) {
      flow_start_[f + 1] = flow_start_[f] + uint32_t(flows[f].links.size());
      flow_links_.insert(flow_links_.end(), flows[f].links.begin(), flows[f].links.end());
      for (auto l : flows[f].links)
        ++count_[l];
    }
    index_links();
  }

  /// The flow no longer shares its links.
  void finish(uint32_t f) {
    state_[f] = finished;
    ++finished_since_index_;
    for (uint32_t i = flow_start_[f]; i < flow_start_[f + 1]; ++i)
      --count_[flow_links_[i]];
  }

  /// Rates of the flows not finished, by index (finished ones keep their last).
  const std::vector<double>& solve() {
    if (2 * finished_since_index_ > live_flows_)
      index_links();
    // Progressive filling: the link with the smallest fair share freezes its flows at that
    // share. Freezing a flow at the minimum share never lowers another link's share, so heap
    // keys are lower bounds: a popped link whose share has grown goes back with its current one.
    link_.resize(capacity_.size());
    ++epoch_;
    heap_.clear();
    for (uint32_t l = 0; l < link_.size(); ++l) {
      link_[l] = {capacity_[l], count_[l]};
      if (count_[l] > 0)
        heap_.emplace_back(capacity_[l] / count_[l], l);
    }
    std::make_heap(heap_.begin(), heap_.end(), std::greater<>{});
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>{});
      auto [key, l] = heap_.back();
      heap_.pop_back();
      if (link_[l].live == 0)
        continue;
      double share = std::max(0.0, link_[l].left / link_[l].live);
      if (share > key && !heap_.empty() && share > heap_.front().first) {
        heap_.emplace_back(share, l);
        std::push_heap(heap_.begin(), heap_.end(), std::greater<>{});
        continue;
      }
      for (uint32_t i = link_start_[l]; i < link_start_[l + 1]; ++i) {
        auto f = on_link_[i];
        if (state_[f] >= epoch_) // frozen in this solve, or finished
          continue;
        state_[f] = epoch_;
        rate_[f] = share;
        for (uint32_t j = flow_start_[f]; j < flow_start_[f + 1]; ++j) {
          auto& k = link_[flow_links_[j]];
          k.left -= share;
          --k.live;
        }
      }
    }
    return rate_;
  }

private:
  static constexpr uint32_t finished = ~uint32_t{0};

  /// link -> its unfinished flows, in flow order.
  void index_links() {
    link_start_.assign(capacity_.size() + 1, 0);
    live_flows_ = 0;
    for (uint32_t f = 0; f + 1 < flow_start_.size(); ++f)
      if (state_[f] != finished) {
        ++live_flows_;
        for (uint32_t i = flow_start_[f]; i < flow_start_[f + 1]; ++i)
          ++link_start_[flow_links_[i] + 1];
      }
    for (size_t l = 0; l < capacity_.size(); ++l)
      link_start_[l + 1] += link_start_[l];
    on_link_.resize(link_start_.back());
    auto fill = link_start_;
    for (uint32_t f = 0; f + 1 < flow_start_.size(); ++f)
      if (state_[f] != finished)
        for (uint32_t i = flow_start_[f]; i < flow_start_[f + 1]; ++i)
          on_link_[fill[flow_links_[i]]++] = f;
    finished_since_index_ = 0;
  }

  const std::vector<double>& capacity_;
  std::vector<uint32_t> flow_start_; // flow f's links are flow_links_[flow_start_[f] .. f + 1)
  std::vector<uint32_t> flow_links_;
  std::vector<uint32_t> link_start_; // link l's flows are on_link_[link_start_[l] .. l + 1)
  std::vector<uint32_t> on_link_;
  std::vector<uint32_t> count_;      // unfinished flows per link
  std::vector<uint32_t> state_;      // the solve that froze the flow, or finished
  std::vector<double> rate_;
  struct link_fill {
    double left;   // capacity not yet given to frozen flows
    uint32_t live; // flows on it not yet frozen
  };
  std::vector<link_fill> link_;
  std::vector<std::pair<double, uint32_t>> heap_;
  uint32_t epoch_ = 0;
  size_t live_flows_ = 0;
  size_t finished_since_index_ = 0;
};

} // namespace

std::vector<double> flow_network::max_min_rates(const std::vector<flow>& flows) const {
  auto rate = max_min_solver{capacity_, flows}.solve();
  for (uint32_t f = 0; f < flows.size(); ++f)
    if (flows[f].links.empty())
      rate[f] = std::numeric_limits<double>::infinity();
  return rate;
}

double flow_network::completion_s(const std::vector<flow>& flows) const {
  std::vector<flow> moving;
  for (auto& f : flows)
    if (f.bytes > 0 && !f.links.empty())
      moving.push_back(f);
  max_min_solver solver{capacity_, moving};
  std::vector<uint32_t> active(moving.size());
  std::iota(active.begin(), active.end(), 0);
  std::vector<double> bytes(moving.size());
  for (size_t i = 0; i < moving.size(); ++i)
    bytes[i] = moving[i].bytes;
  double t = 0;
  while (!active.empty()) {
    const auto& rate = solver.solve();
    double dt = std::numeric_limits<double>::infinity();
    for (auto f : active)
      if (rate[f] > 0)
        dt = std::min(dt, bytes[f] / rate[f]);
    if (!std::isfinite(dt))
      return dt;
    t += dt;
    // Flows due within 0.1% of the elapsed time finish now too (at most that early): a skewed
    // all-to-all has as many distinct finish times as flows, and this bounds the events by
    // the spread of finish times instead.
    const double slack = 1e-3 * t;
    size_t kept = 0;
    for (auto f : active) {
      double rem = bytes[f] - rate[f] * dt;
      if (rem > slack * rate[f]) {
        bytes[f] = rem;
        active[kept++] = f;
      } else {
        solver.finish(f);
      }
    }
    active.resize(kept);
  }
  return t;
}

fabric_network::fabric_network(const fabric_model& model, const circuit_layout& layout)
    : model_(&model) {
  const double b = model.link_bytes_per_s;
  const size_t nics = model.servers.size() * size_t(model.rails);
  nic_up_.resize(nics);
  nic_down_.resize(nics);
  for (size_t i = 0; i < nics; ++i) {
    nic_up_[i] = net_.add_link(b);
    nic_down_[i] = net_.add_link(b);
  }
  // Nodes: ToRs, then per PoD a lift node (towards the core) and a drop node (from it), so a
  // path may only enter a boundary port from a ToR to cross the core, never to turn back.
  const uint32_t tors = uint32_t(model.tors.size());
  const uint32_t pods = uint32_t(model.pods.size());
  auto lift = [&](uint32_t p) { return tors + p; };
  auto drop = [&](uint32_t p) { return tors + pods + p; };
  adj_.resize(tors + 2 * pods);
  radj_.resize(adj_.size());
  auto arc = [&](uint32_t u, uint32_t v, uint32_t circuits) {
    uint32_t link = net_.add_link(circuits * b);
    adj_[u].push_back({v, link});
    radj_[v].push_back({u, link});
  };
  for (uint32_t p = 0; p < layout.agg.size() && p < pods && model.kind != fabric_kind::mfabric;
       ++p) {
    auto& local = model.tors_of_pod(p);
    for (auto& c : layout.agg[p]) {
      bool a_tor = c.a < local.size();
      bool b_tor = c.b < local.size();
      if (a_tor && b_tor) {
        arc(local[c.a], local[c.b], c.circuits);
        arc(local[c.b], local[c.a], c.circuits);
      } else if (a_tor || b_tor) {
        uint32_t t = local[a_tor ? c.a : c.b];
        arc(t, lift(p), c.circuits);
        arc(drop(p), t, c.circuits);
      }
    }
  }
  for (auto& c : layout.core) {
    arc(lift(c.a), drop(c.b), c.circuits);
    arc(lift(c.b), drop(c.a), c.circuits);
  }
  if (model.kind == fabric_kind::mfabric) {
    // mFabric §4.2: regional circuits join servers NIC to NIC; servers relay over NVLink to
    // another of their OCS NICs, and the NICs left on EPS reach every server of the region
    // through its (non-blocking) rail ToRs: a pair without a circuit goes one of those ways.
    server_node_.resize(model.servers.size());
    std::vector<std::vector<uint32_t>> by_pod(pods);
    auto node = [&] {
      adj_.emplace_back();
      radj_.emplace_back();
      return uint32_t(adj_.size() - 1);
    };
    std::vector<uint32_t> eps(pods);
    for (auto& e : eps)
      e = node();
    for (uint32_t s = 0; s < model.servers.size(); ++s) {
      server_node_[s] = node();
      by_pod[model.servers[s].pod].push_back(s);
      uint32_t eps_nics = 0;
      for (int nic = 0; nic < model.rails; ++nic)
        eps_nics += model.tor_of({s, nic}) >= 0;
      if (eps_nics > 0) {
        arc(server_node_[s], eps[model.servers[s].pod], eps_nics);
        arc(eps[model.servers[s].pod], server_node_[s], eps_nics);
      }
    }
    for (uint32_t p = 0; p < layout.agg.size() && p < pods; ++p)
      for (auto& c : layout.agg[p]) {
        auto a = server_node_[by_pod[p][c.a]], b = server_node_[by_pod[p][c.b]];
        arc(a, b, c.circuits);
        arc(b, a, c.circuits);
      }
  }
  for (auto* lists : {&adj_, &radj_})
    for (auto& a : *lists)
      std::sort(a.begin(), a.end(), [](const edge& x, const edge& y) { return x.to < y.to; });
}

const std::vector<std::vector<uint32_t>>& fabric_network::paths(uint32_t from, uint32_t to) const {
  auto [it, fresh] = paths_.try_emplace({from, to});
  if (!fresh)
    return it->second;
  // BFS distances to `to` over reversed arcs, then every shortest path from `from` walking
  // down them, in neighbour order, until 8 are found.
  std::vector<int> dist(adj_.size(), -1);
  std::deque<uint32_t> q{to};
  dist[to] = 0;
  while (!q.empty()) {
    auto u = q.front();
    q.pop_front();
    for (auto& e : radj_[u])
      if (dist[e.to] < 0) {
        dist[e.to] = dist[u] + 1;
        q.push_back(e.to);
      }
  }
  auto& out = it->second;
  if (dist[from] < 0)
    return out;
  std::vector<uint32_t> path;
  std::function<void(uint32_t)> walk = [&](uint32_t u) {
    if (out.size() >= 8)
      return;
    if (u == to) {
      out.push_back(path);
      return;
    }
    for (auto& e : adj_[u]) {
      if (dist[e.to] != dist[u] - 1)
        continue;
      path.push_back(e.link);
      walk(e.to);
      path.pop_back();
    }
  };
  walk(from);
  return out;
}

std::vector<flow_network::flow> fabric_network::route(const std::vector<rank_flow>& flows,
                                                      size_t* unroutable) const {
  std::vector<flow_network::flow> out;
  for (auto& f : flows) {
    if (f.src.server == f.dst.server || f.bytes <= 0)
      continue;
    if (!server_node_.empty()) {
      auto& ps = paths(server_node_[f.src.server], server_node_[f.dst.server]);
      if (ps.empty()) {
        if (unroutable)
          ++*unroutable;
        continue;
      }
      for (auto& p : ps)
        out.push_back({p, f.bytes / double(ps.size())});
      continue;
    }
    size_t src_nic = f.src.server * size_t(model_->rails) + size_t(model_->nic_of(f.src));
    size_t dst_nic = f.dst.server * size_t(model_->rails) + size_t(model_->nic_of(f.dst));
    int ts = model_->tor_of(f.src);
    int td = model_->tor_of(f.dst);
    if (ts < 0 || td < 0) {
      if (unroutable)
        ++*unroutable;
      continue;
    }
    if (ts == td) {
      out.push_back({{nic_up_[src_nic], nic_down_[dst_nic]}, f.bytes});
      continue;
    }
    auto& ps = paths(uint32_t(ts), uint32_t(td));
    if (ps.empty()) {
      if (unroutable)
        ++*unroutable;
      out.push_back({{}, f.bytes}); // never finishes: reported as infinite time
      continue;
    }
    for (auto& p : ps) {
      flow_network::flow nf{{nic_up_[src_nic]}, f.bytes / double(ps.size())};
      nf.links.insert(nf.links.end(), p.begin(), p.end());
      nf.links.push_back(nic_down_[dst_nic]);
      out.push_back(std::move(nf));
    }
  }
  return out;
}

double fabric_network::completion_s(const std::vector<rank_flow>& flows) const {
  size_t unroutable = 0;
  auto routed = route(flows, &unroutable);
  if (unroutable > 0)
    return std::numeric_limits<double>::infinity();
  return net_.completion_s(routed);
}

} // namespace loom
