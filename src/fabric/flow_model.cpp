#include "fabric/flow_model.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>

namespace loom {

uint32_t flow_network::add_link(double bytes_per_s) {
  capacity_.push_back(bytes_per_s);
  return uint32_t(capacity_.size() - 1);
}

std::vector<double> flow_network::max_min_rates(const std::vector<flow>& flows) const {
  const size_t nl = capacity_.size();
  std::vector<double> left = capacity_;
  std::vector<uint32_t> count(nl, 0);
  std::vector<std::vector<uint32_t>> on_link(nl);
  for (uint32_t f = 0; f < flows.size(); ++f)
    for (auto l : flows[f].links) {
      ++count[l];
      on_link[l].push_back(f);
    }
  // Progressive filling: the link with the smallest fair share freezes its flows at that share.
  // Freezing a flow at the minimum share never lowers another link's share, so heap keys are
  // lower bounds: a popped link whose share has grown goes back in with its current share.
  using entry = std::pair<double, uint32_t>;
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap;
  for (uint32_t l = 0; l < nl; ++l)
    if (count[l] > 0)
      heap.emplace(left[l] / count[l], l);
  std::vector<double> rate(flows.size(), 0);
  std::vector<bool> frozen(flows.size(), false);
  while (!heap.empty()) {
    auto [key, l] = heap.top();
    heap.pop();
    if (count[l] == 0)
      continue;
    double share = std::max(0.0, left[l] / count[l]);
    if (share > key && !heap.empty() && share > heap.top().first) {
      heap.emplace(share, l);
      continue;
    }
    for (auto f : on_link[l]) {
      if (frozen[f])
        continue;
      frozen[f] = true;
      rate[f] = share;
      for (auto k : flows[f].links) {
        left[k] -= share;
        --count[k];
      }
    }
  }
  for (uint32_t f = 0; f < flows.size(); ++f)
    if (flows[f].links.empty())
      rate[f] = std::numeric_limits<double>::infinity();
  return rate;
}

double flow_network::completion_s(const std::vector<flow>& flows) const {
  std::vector<flow> active;
  for (auto& f : flows)
    if (f.bytes > 0 && !f.links.empty())
      active.push_back(f);
  double t = 0;
  while (!active.empty()) {
    auto rate = max_min_rates(active);
    double dt = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < active.size(); ++i)
      if (rate[i] > 0)
        dt = std::min(dt, active[i].bytes / rate[i]);
    if (!std::isfinite(dt))
      return dt;
    t += dt;
    // Flows due within 0.1% of the elapsed time finish now too (at most that early): a skewed
    // all-to-all has as many distinct finish times as flows, and this bounds the events by
    // the spread of finish times instead.
    const double slack = 1e-3 * t;
    std::vector<flow> next;
    for (size_t i = 0; i < active.size(); ++i) {
      double rem = active[i].bytes - rate[i] * dt;
      if (rem > slack * rate[i]) {
        next.push_back(std::move(active[i]));
        next.back().bytes = rem;
      }
    }
    active = std::move(next);
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
  for (uint32_t p = 0; p < layout.agg.size() && p < pods; ++p) {
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
