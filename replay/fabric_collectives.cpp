#include "replay/fabric_collectives.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <regex>

#include "fabric/circuit_plan.hpp"
#include "fabric/flow_model.hpp"
#include "fabric/stage_template.hpp"

namespace loom::replay {

std::optional<std::vector<parallel_dim>> parse_parallel_layout(const std::string& text) {
  static const std::regex dim{R"(([A-Z]+)([0-9]+))"};
  std::vector<parallel_dim> out;
  size_t start = 0;
  while (start <= text.size()) {
    auto end = text.find('_', start);
    auto part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::smatch m;
    if (!std::regex_match(part, m, dim) || std::stoi(m[2]) < 1)
      return std::nullopt;
    out.push_back({m[1], std::stoi(m[2])});
    if (end == std::string::npos)
      break;
    start = end + 1;
  }
  return out;
}

std::vector<std::vector<rank_ref>> domain_groups(const std::vector<parallel_dim>& layout,
                                                 const std::string& domain, int gpus_per_server,
                                                 rank_placement placement, uint64_t seed) {
  int ranks = 1;
  size_t d = layout.size();
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].name == domain)
      d = i;
    ranks *= layout[i].size;
  }
  std::vector<int> slot(static_cast<size_t>(ranks)); // rank -> GPU slot
  std::iota(slot.begin(), slot.end(), 0);
  if (placement == rank_placement::random) {
    std::mt19937_64 rng{seed};
    std::shuffle(slot.begin(), slot.end(), rng);
  }
  std::map<int, std::vector<rank_ref>> groups; // key: the rank with the domain coordinate zeroed
  for (int r = 0; r < ranks; ++r) {
    int stride = 1;
    int key = r;
    for (size_t i = 0; i < layout.size(); ++i) {
      if (i == d)
        key -= (r / stride) % layout[i].size * stride;
      stride *= layout[i].size;
    }
    const int at = slot[size_t(r)];
    groups[key].push_back({uint32_t(at / gpus_per_server), at % gpus_per_server});
  }
  std::vector<std::vector<rank_ref>> out;
  for (auto& [k, g] : groups)
    out.push_back(std::move(g));
  return out;
}

namespace {

/// The busiest NIC's bytes (sent or received) at line rate.
double nic_bound_s(const fabric_model& model, const std::vector<rank_flow>& flows) {
  std::map<std::pair<uint32_t, int>, double> sent, received;
  for (auto& f : flows)
    if (f.src.server != f.dst.server) {
      sent[{f.src.server, model.nic_of(f.src)}] += f.bytes;
      received[{f.dst.server, model.nic_of(f.dst)}] += f.bytes;
    }
  double most = 0;
  for (auto* side : {&sent, &received})
    for (auto& [nic, bytes] : *side)
      most = std::max(most, bytes);
  return most / model.link_bytes_per_s;
}

collective_facts facts_of(const fabric_model& model, const aggregated_demand& demand,
                          const std::vector<rank_flow>& flows, int uplinks) {
  collective_facts f;
  f.nic_bound_s = nic_bound_s(model, flows);
  f.uplinks = uint32_t(uplinks);
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (auto& pd : demand.pods) {
    std::map<std::pair<uint32_t, uint32_t>, double> pairs;
    for (auto& d : pd.demands)
      if (d.from != pd.boundary() && d.to != pd.boundary())
        pairs[std::minmax(d.from, d.to)] += d.bytes;
    std::map<uint32_t, uint32_t> peers;
    for (auto& [pair, bytes] : pairs) {
      ++peers[pair.first];
      ++peers[pair.second];
      lo = std::min(lo, bytes);
      hi = std::max(hi, bytes);
    }
    f.demanded_pairs += uint32_t(pairs.size());
    for (auto& [tor, n] : peers)
      f.peers_max = std::max(f.peers_max, n);
  }
  f.volume_spread = hi > 0 ? hi / lo : 1;
  return f;
}

} // namespace

collective_result evaluate_collective(const rfabric_shape& shape, const collective_setup& setup,
                                      uint64_t seed, rank_placement placement) {
  auto shaped = make_rfabric(shape);
  auto model = fabric_model::build(shaped.config, shaped.nodes).value;
  std::mt19937_64 rng{seed};
  std::lognormal_distribution<double> load{0.0, setup.expert_skew};
  std::vector<rank_flow> flows;
  std::vector<rank_ref> members;
  for (auto& g : domain_groups(setup.layout, setup.domain, shape.gpus_per_server, placement,
                               seed)) {
    collective c{setup.kind, g, setup.bytes_per_rank, {}};
    if (setup.kind == primitive::all_to_all && setup.expert_skew > 0)
      for (size_t i = 0; i < g.size(); ++i)
        c.receive_weights.push_back(load(rng));
    auto part = collective_flows(c);
    flows.insert(flows.end(), part.begin(), part.end());
    members.insert(members.end(), g.begin(), g.end());
  }
  auto demand = aggregate_demand(*model, flows);
  fabric_intent intent{setup.name, fabric_stage::train_compute, {{setup.kind, 1.0}}, members,
                       setup.bytes_per_rank};
  auto tpl = select_template(*model, intent);
  port_usage usage(*model);
  collective_result out;
  auto time = [&](allocation_policy policy, uint32_t* circuits) {
    auto plan = materialize_plan(*model, tpl, demand, usage, setup.name, nullptr, policy);
    if (!plan.plan)
      return std::numeric_limits<double>::infinity();
    if (circuits)
      *circuits = uint32_t(plan.plan->circuits.size());
    return fabric_network(*model, plan.plan->layout).completion_s(flows);
  };
  out.traffic_aware_s = time(allocation_policy::traffic_aware, &out.aware_circuits);
  out.algorithm_3_s = time(allocation_policy::algorithm_3, nullptr);
  out.uniform_s = time(allocation_policy::uniform, &out.uniform_circuits);
  out.uniform_all_s = time(allocation_policy::uniform_all, nullptr);
  out.facts = facts_of(*model, demand, flows, shape.tor_uplinks);
  return out;
}

} // namespace loom::replay
