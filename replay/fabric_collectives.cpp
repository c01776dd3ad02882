#include "replay/fabric_collectives.hpp"

#include <limits>
#include <map>
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
                                                 const std::string& domain, int gpus_per_server) {
  int ranks = 1;
  size_t d = layout.size();
  for (size_t i = 0; i < layout.size(); ++i) {
    if (layout[i].name == domain)
      d = i;
    ranks *= layout[i].size;
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
    groups[key].push_back({uint32_t(r / gpus_per_server), r % gpus_per_server});
  }
  std::vector<std::vector<rank_ref>> out;
  for (auto& [k, g] : groups)
    out.push_back(std::move(g));
  return out;
}

collective_result evaluate_collective(const rfabric_shape& shape, const collective_setup& setup,
                                      uint64_t seed) {
  auto shaped = make_rfabric(shape);
  auto model = fabric_model::build(shaped.config, shaped.nodes).value;
  std::mt19937_64 rng{seed};
  std::lognormal_distribution<double> load{0.0, setup.expert_skew};
  std::vector<rank_flow> flows;
  std::vector<rank_ref> members;
  for (auto& g : domain_groups(setup.layout, setup.domain, shape.gpus_per_server)) {
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
  auto time = [&](allocation_policy policy, uint32_t& circuits) {
    auto plan = materialize_plan(*model, tpl, demand, usage, setup.name, nullptr, policy);
    if (!plan.plan)
      return std::numeric_limits<double>::infinity();
    circuits = uint32_t(plan.plan->circuits.size());
    return fabric_network(*model, plan.plan->layout).completion_s(flows);
  };
  out.traffic_aware_s = time(allocation_policy::traffic_aware, out.aware_circuits);
  out.uniform_s = time(allocation_policy::uniform, out.uniform_circuits);
  return out;
}

} // namespace loom::replay
