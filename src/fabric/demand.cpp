#include "fabric/demand.hpp"

#include <algorithm>
#include <map>
#include <numeric>

#include <fmt/format.h>

namespace loom {

std::vector<rank_flow> collective_flows(const collective& c) {
  std::vector<rank_flow> out;
  const size_t n = c.group.size();
  if (n < 2 || c.bytes <= 0)
    return out;
  const double nd = double(n);
  switch (c.kind) {
    case primitive::all_reduce:
    case primitive::all_gather:
    case primitive::reduce_scatter: {
      double share = (c.kind == primitive::all_reduce ? 2.0 : 1.0) * (nd - 1) / nd * c.bytes;
      for (size_t i = 0; i < n; ++i)
        out.push_back({c.group[i], c.group[(i + 1) % n], share});
      break;
    }
    case primitive::all_to_all: {
      std::vector<double> w = c.receive_weights;
      if (w.size() != n)
        w.assign(n, 1.0);
      double total = std::accumulate(w.begin(), w.end(), 0.0);
      for (size_t i = 0; i < n; ++i) {
        double others = total - w[i];
        if (others <= 0)
          continue;
        for (size_t j = 0; j < n; ++j)
          if (j != i && w[j] > 0)
            out.push_back({c.group[i], c.group[j], c.bytes * w[j] / others});
      }
      break;
    }
    case primitive::broadcast:
      for (size_t i = 1; i < n; ++i)
        out.push_back({c.group[(i - 1) / 2], c.group[i], c.bytes});
      break;
    case primitive::send_recv:
      for (size_t i = 0; i + 1 < n; i += 2)
        out.push_back({c.group[i], c.group[i + 1], c.bytes});
      break;
    case primitive::m2n: {
      size_t half = n / 2;
      for (size_t i = 0; i < half; ++i)
        for (size_t j = half; j < n; ++j)
          out.push_back({c.group[i], c.group[j], c.bytes / double(n - half)});
      break;
    }
  }
  return out;
}

std::vector<rank_flow> intent_flows(const fabric_intent& intent) {
  std::vector<rank_flow> out;
  const size_t n = intent.members.size();
  const size_t size = intent.group_size > 0 ? intent.group_size : std::max<size_t>(n, 1);
  for (size_t first = 0; first < n; first += size) {
    std::vector<rank_ref> group(intent.members.begin() + long(first),
                                intent.members.begin() + long(std::min(n, first + size)));
    std::vector<double> weights;
    if (intent.receive_weights.size() == n)
      weights.assign(intent.receive_weights.begin() + long(first),
                     intent.receive_weights.begin() + long(first + group.size()));
    for (auto& m : intent.mix) {
      auto part = collective_flows({m.kind, group, intent.bytes * m.fraction,
                                    m.kind == primitive::all_to_all ? weights
                                                                    : std::vector<double>{}});
      out.insert(out.end(), part.begin(), part.end());
    }
  }
  return out;
}

namespace {

/// Summed directed demand keyed by (from, to), emitted in key order.
class demand_sum {
public:
  void add(uint32_t from, uint32_t to, double bytes) { sum_[{from, to}] += bytes; }
  std::vector<demand> take() const {
    std::vector<demand> out;
    out.reserve(sum_.size());
    for (auto& [k, b] : sum_)
      out.push_back({k.first, k.second, b});
    return out;
  }

private:
  std::map<std::pair<uint32_t, uint32_t>, double> sum_;
};

} // namespace

aggregated_demand aggregate_demand(const fabric_model& model, const std::vector<rank_flow>& flows) {
  aggregated_demand out;
  const size_t pods = model.pods.size();
  out.pods.resize(pods);
  std::vector<int> local_index(model.tors.size(), -1);
  for (uint32_t p = 0; p < pods; ++p) {
    out.pods[p].tors = model.tors_of_pod(p);
    for (size_t i = 0; i < out.pods[p].tors.size(); ++i)
      local_index[out.pods[p].tors[i]] = int(i);
  }
  std::vector<demand_sum> agg(pods);
  demand_sum core;
  for (auto& f : flows) {
    int ts = model.tor_of(f.src);
    int td = model.tor_of(f.dst);
    if (f.src.server == f.dst.server || ts < 0 || td < 0 || ts == td) {
      out.local_bytes += f.bytes;
      continue;
    }
    uint32_t ps = model.pod_of(f.src);
    uint32_t pd = model.pod_of(f.dst);
    uint32_t ls = uint32_t(local_index[size_t(ts)]);
    uint32_t ld = uint32_t(local_index[size_t(td)]);
    if (ps == pd) {
      agg[ps].add(ls, ld, f.bytes);
      continue;
    }
    agg[ps].add(ls, out.pods[ps].boundary(), f.bytes); // lift
    agg[pd].add(out.pods[pd].boundary(), ld, f.bytes); // drop
    core.add(ps, pd, f.bytes);
  }
  for (uint32_t p = 0; p < pods; ++p)
    out.pods[p].demands = agg[p].take();
  out.core = core.take();
  return out;
}

std::vector<demand> server_demand(const fabric_model& model, uint32_t pod,
                                  const std::vector<rank_flow>& flows) {
  std::vector<int> local(model.servers.size(), -1);
  int next = 0;
  for (uint32_t s = 0; s < model.servers.size(); ++s)
    if (model.servers[s].pod == pod)
      local[s] = next++;
  demand_sum sum;
  for (auto& f : flows)
    if (f.src.server != f.dst.server && local[f.src.server] >= 0 && local[f.dst.server] >= 0)
      sum.add(uint32_t(local[f.src.server]), uint32_t(local[f.dst.server]), f.bytes);
  return sum.take();
}

} // namespace loom
