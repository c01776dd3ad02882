#include "replay/fabric_replay.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <limits>

#include "fabric/broadcast.hpp"
#include "replay/fabric_rl.hpp"
#include "replay/report.hpp"

namespace loom::replay {

namespace {

using json = nlohmann::json;
using wall = std::chrono::steady_clock;

double seconds_since(wall::time_point t) {
  return std::chrono::duration<double>(wall::now() - t).count();
}

json collectives_json(const fabric_scenario& sc, std::string& summary) {
  json out = json::array();
  summary += "Fig. 23: traffic-aware vs uniform OCS-Agg allocation\n";
  summary += fmt::format("  {:<18} {:<10} {:>10} {:>10} {:>9} {:>9}\n", "setup", "kind",
                         "aware s", "uniform s", "change", "paper");
  for (auto& c : sc.collectives) {
    auto r = evaluate_collective(sc.shape, c, sc.seed);
    double change = std::isfinite(r.traffic_aware_s) && std::isfinite(r.uniform_s)
                      ? r.reduction()
                      : std::numeric_limits<double>::quiet_NaN();
    out.push_back({{"name", c.name},
                   {"kind", std::string{to_string(c.kind)}},
                   {"domain", c.domain},
                   {"gb_per_rank", round4(c.bytes_per_rank / 1e9)},
                   {"expert_skew", c.expert_skew},
                   {"traffic_aware_s", time_json(r.traffic_aware_s)},
                   {"uniform_s", time_json(r.uniform_s)},
                   {"traffic_aware_circuits", r.aware_circuits},
                   {"uniform_circuits", r.uniform_circuits},
                   {"reduction", std::isfinite(change) ? json(round4(change)) : json(nullptr)},
                   {"paper_reduction", c.paper_reduction}});
    summary += fmt::format("  {:<18} {:<10} {:>10.4f} {:>10.4f} {:>+8.1f}% {:>+8.1f}%\n", c.name,
                           to_string(c.kind), r.traffic_aware_s, r.uniform_s, change * 100,
                           c.paper_reduction * 100);
  }
  return out;
}

json cost_json(const cost_section& c, std::string& summary) {
  json out;
  out["endpoints"] = c.design.endpoints;
  out["switch_radix"] = c.design.switch_radix;
  out["tor_uplink_ratio"] = c.design.tor_uplink_ratio;
  out["boundary_ratio"] = c.design.boundary_ratio;
  out["paper_rfabric_ratio"] = c.paper_rfabric_ratio;
  summary += fmt::format("Fig. 15: network cost for {} endpoints (radix {}), relative to "
                         "fat-tree\n", c.design.endpoints, c.design.switch_radix);
  json speeds = json::array();
  for (double gbps : c.link_gbps) {
    auto* prices = table4_prices(gbps);
    auto design = c.design;
    json row{{"link_gbps", gbps}};
    design.kind = network_kind::fat_tree;
    auto ft = price_network(design, *prices);
    row["fat_tree_tiers"] = ft.tiers;
    std::string line = fmt::format("  {} Gbps:", gbps);
    for (auto kind : {network_kind::fat_tree, network_kind::fat_tree_oversubscribed,
                      network_kind::rail_optimized, network_kind::rfabric}) {
      design.kind = kind;
      auto cost = price_network(design, *prices);
      row[std::string{to_string(kind)}] = {{"dollars", std::round(cost.dollars)},
                                           {"ratio", round4(cost.dollars / ft.dollars)}};
      line += fmt::format(" {} {:.3f}", to_string(kind), cost.dollars / ft.dollars);
    }
    // Sensitivity to the two sizing choices the paper does not publish.
    json sweep = json::array();
    design.kind = network_kind::rfabric;
    for (double up : {0.5, 0.75, 1.0})
      for (double boundary : {0.25, 0.5, 1.0}) {
        design.tor_uplink_ratio = up;
        design.boundary_ratio = boundary;
        sweep.push_back({{"tor_uplink_ratio", up},
                         {"boundary_ratio", boundary},
                         {"ratio", round4(price_network(design, *prices).dollars / ft.dollars)}});
      }
    row["rfabric_sensitivity"] = sweep;
    speeds.push_back(row);
    summary += line + "\n";
  }
  out["by_link_speed"] = speeds;
  return out;
}

json opus_json(const opus_section& o, std::string& summary) {
  json out;
  out["ocs_latency_ms"] = round4(o.env.ocs_latency_s * 1e3);
  out["control_ms"] = round4(o.env.control_s * 1e3);
  json configs = json::array();
  summary += fmt::format("Opus Table 2 at {} ms OCS latency: step time vs native EPS\n",
                         o.env.ocs_latency_s * 1e3);
  summary += fmt::format("  {:<10} {:>9} {:>10} {:>13} {:>9} {:>8}\n", "config", "native s",
                         "on-demand", "provisioning", "reconfig", "paper");
  for (auto& c : o.configs) {
    auto native = simulate_opus(c.workload, o.env, opus_mode::native, o.steps);
    auto demand = simulate_opus(c.workload, o.env, opus_mode::on_demand, o.steps);
    auto prov = simulate_opus(c.workload, o.env, opus_mode::provisioning, o.steps);
    auto zero_env = o.env;
    zero_env.ocs_latency_s = 0;
    auto prov_zero = simulate_opus(c.workload, zero_env, opus_mode::provisioning, o.steps);
    auto& w = c.workload;
    configs.push_back({{"name", w.name},
                       {"model", w.model.name},
                       {"tp", w.tp},
                       {"fsdp", w.fsdp},
                       {"pp", w.pp},
                       {"global_batch", w.global_batch},
                       {"seq_len", w.seq_len},
                       {"native_step_s", round4(native.step_s)},
                       {"on_demand_step_s", round4(demand.step_s)},
                       {"provisioning_step_s", round4(prov.step_s)},
                       {"provisioning_0ms_step_s", round4(prov_zero.step_s)},
                       {"on_demand_ratio", round4(demand.step_s / native.step_s)},
                       {"provisioning_ratio", round4(prov.step_s / native.step_s)},
                       {"provisioning_vs_0ms", round4(prov.step_s / prov_zero.step_s)},
                       {"reconfigs_per_step", prov.reconfigs},
                       {"submappings_per_step", prov.submappings},
                       {"suppressed_per_step", prov.suppressed},
                       {"topo_writes_per_step", prov.topo_writes},
                       {"phase_boundaries_per_stage", prov.phase_boundaries},
                       {"paper_on_demand_ratio", c.paper_on_demand},
                       {"paper_provisioning_ratio", c.paper_provisioning},
                       {"paper_reconfigs_per_step", c.paper_reconfigs}});
    summary += fmt::format("  {:<10} {:>9.3f} {:>9.3f}x {:>12.3f}x {:>9} {:>8}\n", w.name,
                           native.step_s, demand.step_s / native.step_s,
                           prov.step_s / native.step_s, prov.reconfigs,
                           fmt::format("{}x/{}", c.paper_provisioning, c.paper_reconfigs));
  }
  out["configs"] = configs;
  return out;
}

json weight_sync_json(const weight_sync_section& w, std::string& summary) {
  broadcast_params p;
  p.shard_bytes = w.shard_gb * 1e9;
  p.core_link_bytes_per_s = w.link_gbps * 1e9 / 8;
  p.intra_link_bytes_per_s = p.core_link_bytes_per_s;
  p.pod_budget.assign(w.gen_pods + 1, w.pod_budget);
  p.seeds_per_pod = w.seeds_per_pod;
  p.fanout = w.fanout;
  std::vector<endpoint_ref> holders;
  std::vector<endpoint_ref> receivers;
  uint32_t id = 0;
  for (uint32_t h = 0; h < w.holders; ++h)
    holders.push_back({id++, 0});
  for (uint32_t pod = 1; pod <= w.gen_pods; ++pod)
    for (uint32_t r = 0; r < w.receivers_per_pod; ++r)
      receivers.push_back({id++, pod});
  auto forest = plan_broadcast(holders, receivers, p);
  auto flat = plan_flat_broadcast(holders, receivers, p);
  double one_copy = one_copy_then_broadcast_s(receivers.size(), w.cross_link_gbps * 1e9 / 8, p);
  // Every wave must keep every PoD within d_p.
  bool within = true;
  for (auto* plan : {&forest, &flat})
    for (auto& wave : plan->waves) {
      std::map<uint32_t, uint32_t> incident;
      for (auto& e : wave) {
        incident[e.from.pod] += e.circuits;
        incident[e.to.pod] += e.circuits;
      }
      for (auto& [pod, n] : incident)
        within &= n <= p.pod_budget[pod];
    }
  summary += fmt::format("App. E weight sync ({} GB shard, {} receivers in {} PoDs, d_p {}): "
                         "forest {:.3f} s ({} waves), flat {:.3f} s, one copy + broadcast "
                         "{:.3f} s\n", w.shard_gb, receivers.size(), w.gen_pods, w.pod_budget,
                         forest.total_s(), forest.waves.size(), flat.total_s(), one_copy);
  return {{"shard_gb", w.shard_gb},
          {"receivers", receivers.size()},
          {"pod_budget", w.pod_budget},
          {"forest_s", round4(forest.total_s())},
          {"forest_phase_a_s", round4(forest.phase_a_s)},
          {"forest_phase_b_s", round4(forest.phase_b_s)},
          {"forest_waves", forest.waves.size()},
          {"flat_s", round4(flat.total_s())},
          {"flat_waves", flat.waves.size()},
          {"one_copy_then_broadcast_s", round4(one_copy)},
          {"budgets_respected", within}};
}

} // namespace

caf::expected<fabric_replay_output> run_fabric_replay(const fabric_scenario& sc,
                                                      const std::string& out_dir) {
  if (auto err = make_output_dir(out_dir))
    return err;
  fabric_replay_output out;
  json report{{"scenario", sc.name}, {"kind", "fabric"}, {"seed", sc.seed}};
  report["fabric"] = {{"pods", sc.shape.pods},
                      {"racks_per_pod", sc.shape.racks_per_pod},
                      {"servers_per_rack", sc.shape.servers_per_rack},
                      {"gpus_per_server", sc.shape.gpus_per_server},
                      {"tor_uplinks", sc.shape.tor_uplinks},
                      {"boundary_ports", sc.shape.boundary_ports},
                      {"link_gbps", sc.shape.link_gbps}};
  json timings;
  auto timed = [&](const char* name, auto fn) {
    auto start = wall::now();
    fn();
    timings[std::string{name} + "_s"] = seconds_since(start);
  };
  if (!sc.collectives.empty())
    timed("collectives", [&] { report["collectives"] = collectives_json(sc, out.summary); });
  if (sc.cost)
    timed("cost", [&] { report["cost"] = cost_json(*sc.cost, out.summary); });
  if (sc.opus)
    timed("opus", [&] { report["opus"] = opus_json(*sc.opus, out.summary); });
  if (sc.weight_sync)
    timed("weight_sync",
          [&] { report["weight_sync"] = weight_sync_json(*sc.weight_sync, out.summary); });
  if (sc.rl) {
    caf::error failed;
    timed("rl", [&] {
      auto r = rl_json(sc, *sc.rl, out_dir, out.summary);
      if (r)
        report["rl"] = *r;
      else
        failed = r.error();
    });
    if (failed)
      return failed;
  }
  out.report_json = report.dump(2) + "\n";
  out.timings_json = timings.dump(2) + "\n";
  if (auto err = write_report_files(out_dir, out.report_json, out.timings_json))
    return err;
  return out;
}

} // namespace loom::replay
