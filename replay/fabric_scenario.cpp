#include "replay/fabric_scenario.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "config/toml_reader.hpp"

namespace loom::replay {

namespace {

void int_into(table_reader& r, std::string_view key, int& field, int min) {
  if (auto v = at_least<int64_t>(r, key, r.optional<int64_t>(key, field), min))
    field = int(*v);
}

void uint_into(table_reader& r, std::string_view key, uint32_t& field, uint32_t min) {
  if (auto v = at_least<int64_t>(r, key, r.optional<int64_t>(key, field), min))
    field = uint32_t(*v);
}

void read_shape(table_reader& f, rfabric_shape& s) {
  int_into(f, "pods", s.pods, 1);
  int_into(f, "racks_per_pod", s.racks_per_pod, 1);
  int_into(f, "servers_per_rack", s.servers_per_rack, 1);
  int_into(f, "gpus_per_server", s.gpus_per_server, 1);
  int_into(f, "tor_uplinks", s.tor_uplinks, 1);
  int_into(f, "boundary_ports", s.boundary_ports, 0);
  int_into(f, "core_devices", s.core_devices, 1);
  positive_into(f, "link_gbps", s.link_gbps);
  positive_into(f, "agg_reconfig_ms", s.agg_reconfig_ms);
  positive_into(f, "core_reconfig_ms", s.core_reconfig_ms);
  f.reject_unknown();
}

void read_collective(table_reader& c, fabric_scenario& sc) {
  collective_setup s;
  if (auto v = c.required<std::string>("name"))
    s.name = *v;
  auto kind = one_of<primitive>(c, "kind", c.required<std::string>("kind"));
  if (kind && (*kind == primitive::all_to_all || *kind == primitive::all_reduce
               || *kind == primitive::all_gather || *kind == primitive::reduce_scatter))
    s.kind = *kind;
  else if (kind)
    c.error("kind", fmt::format("Fig. 23 compares all-to-all, all-reduce, all-gather and "
                                "reduce-scatter, not {}", *kind));
  int ranks = 0;
  if (auto v = c.required<std::string>("layout")) {
    if (auto l = parse_parallel_layout(*v)) {
      s.layout = *l;
      ranks = 1;
      for (auto& d : s.layout)
        ranks *= d.size;
    } else {
      c.error("layout", fmt::format("'{}' is not a parallelism layout such as \"TP4_DP16\"", *v));
    }
  }
  if (auto v = c.required<std::string>("domain")) {
    s.domain = *v;
    bool found = false;
    for (auto& d : s.layout)
      found |= d.name == *v;
    if (!s.layout.empty() && !found)
      c.error("domain", fmt::format("'{}' is not a dimension of the layout", *v));
  }
  if (auto v = positive(c, "gb_per_rank", c.required<double>("gb_per_rank")))
    s.bytes_per_rank = *v * 1e9;
  if (auto v = non_negative(c, "expert_skew", c.optional<double>("expert_skew", 0)))
    s.expert_skew = *v;
  if (auto v = c.optional<double>("paper_reduction", 0))
    s.paper_reduction = *v;
  int capacity = sc.shape.pods * sc.shape.racks_per_pod * sc.shape.servers_per_rack
                 * sc.shape.gpus_per_server;
  if (ranks > capacity)
    c.error("layout", fmt::format("{} ranks do not fit the fabric's {} GPUs", ranks, capacity));
  c.reject_unknown();
  sc.collectives.push_back(std::move(s));
}

void ints_into(table_reader& w, std::string_view key, std::vector<int>& into, int min) {
  for (auto v : w.optional<std::vector<int64_t>>(key, {}).value_or(std::vector<int64_t>{})) {
    if (v < min)
      w.error(key, fmt::format("must be at least {}, got {}", min, v));
    else
      into.push_back(int(v));
  }
}

void read_sweep(table_reader& w, fabric_scenario& sc) {
  auto& s = sc.sweep;
  ints_into(w, "tor_uplinks", s.tor_uplinks, 1);
  ints_into(w, "servers_per_rack", s.servers_per_rack, 1);
  const int servers = sc.shape.racks_per_pod * sc.shape.servers_per_rack;
  for (int spr : s.servers_per_rack)
    if (servers % spr != 0)
      w.error("servers_per_rack", fmt::format("{} servers per rack do not divide the PoD's {} "
                                              "servers", spr, servers));
  if (auto names = w.optional<std::vector<std::string>>("placements", {"linear"})) {
    s.placements.clear();
    for (auto& n : *names)
      if (auto p = parse_name<rank_placement>(n))
        s.placements.push_back(*p);
      else
        w.error("placements", fmt::format("'{}' is not linear or random", n));
  }
  w.reject_unknown();
}

void read_cost(table_reader& c, fabric_scenario& sc) {
  cost_section s;
  positive_into(c, "endpoints", s.design.endpoints);
  int_into(c, "switch_radix", s.design.switch_radix, 4);
  positive_into(c, "oversubscription", s.design.oversubscription);
  positive_into(c, "tor_uplink_ratio", s.design.tor_uplink_ratio);
  if (auto v = non_negative(c, "boundary_ratio",
                            c.optional<double>("boundary_ratio", s.design.boundary_ratio)))
    s.design.boundary_ratio = *v;
  if (auto v = c.optional<std::vector<int64_t>>("link_gbps", {200, 400})) {
    s.link_gbps.clear();
    for (auto g : *v) {
      if (!table4_prices(double(g)))
        c.error("link_gbps", fmt::format("{} Gbps has no Table 4 prices (100, 200, 400, 800)", g));
      s.link_gbps.push_back(double(g));
    }
  }
  if (auto v = c.optional<std::vector<double>>("paper_rfabric_ratio", {}))
    s.paper_rfabric_ratio = *v;
  c.reject_unknown();
  sc.cost = s;
}

/// The cluster a training step runs on: [opus] sets it for every config, a config may
/// override it (§5.3 runs on H200 and GB200 beside Table 2's A100s).
void read_opus_env(table_reader& o, opus_env& env) {
  if (auto v = non_negative(o, "ocs_latency_ms",
                            o.optional<double>("ocs_latency_ms", env.ocs_latency_s * 1e3)))
    env.ocs_latency_s = *v / 1e3;
  if (auto v = non_negative(o, "control_ms", o.optional<double>("control_ms", env.control_s * 1e3)))
    env.control_s = *v / 1e3;
  if (auto v = non_negative(o, "control_per_rank_ms",
                            o.optional<double>("control_per_rank_ms",
                                               env.control_per_rank_s * 1e3)))
    env.control_per_rank_s = *v / 1e3;
  positive_into(o, "gpu_tflops", env.gpu_tflops);
  if (auto v = fraction(o, "mfu", o.optional<double>("mfu", env.mfu)))
    env.mfu = *v;
  positive_into(o, "link_gbps", env.link_gbps);
}

void read_opus(table_reader& o, fabric_scenario& sc) {
  opus_section s;
  read_opus_env(o, s.env);
  int_into(o, "steps", s.steps, 2);
  for (auto& c : o.table_array("configs")) {
    opus_config_entry e;
    e.env = s.env;
    read_opus_env(c, e.env);
    auto& w = e.workload;
    if (auto v = c.required<std::string>("name"))
      w.name = *v;
    if (auto v = c.required<std::string>("model")) {
      if (auto m = find_opus_model(*v))
        w.model = *m;
      else
        c.error("model", fmt::format("'{}' is not one of: {}", *v, opus_model_names()));
    }
    int_into(c, "global_batch", w.global_batch, 1);
    int_into(c, "seq_len", w.seq_len, 1);
    int_into(c, "tp", w.tp, 1);
    int_into(c, "fsdp", w.fsdp, 1);
    int_into(c, "pp", w.pp, 1);
    if (w.pp > 9)
      c.error("pp", "a topo_id has one decimal digit per stage: at most 9 stages here");
    for (auto [key, into] : {std::pair{"paper_on_demand", &e.paper_on_demand},
                             std::pair{"paper_provisioning", &e.paper_provisioning},
                             std::pair{"paper_control_on_demand", &e.paper_control_on_demand},
                             std::pair{"paper_control_provisioning",
                                       &e.paper_control_provisioning}})
      if (auto v = c.optional<double>(key, std::numeric_limits<double>::quiet_NaN());
          v && !std::isnan(*v))
        *into = *v;
    // Absent: not reported (read as -1, which no count can be).
    if (auto raw = c.optional<int64_t>("paper_reconfigs", -1); raw && *raw != -1)
      if (auto v = at_least<int64_t>(c, "paper_reconfigs", raw, 0))
        e.paper_reconfigs = int(*v);
    c.reject_unknown();
    s.configs.push_back(std::move(e));
  }
  o.reject_unknown();
  sc.opus = std::move(s);
}

void read_weight_sync(table_reader& w, fabric_scenario& sc) {
  weight_sync_section s;
  positive_into(w, "shard_gb", s.shard_gb);
  uint_into(w, "holders", s.holders, 1);
  uint_into(w, "gen_pods", s.gen_pods, 1);
  uint_into(w, "receivers_per_pod", s.receivers_per_pod, 1);
  uint_into(w, "pod_budget", s.pod_budget, 1);
  uint_into(w, "seeds_per_pod", s.seeds_per_pod, 1);
  uint_into(w, "fanout", s.fanout, 1);
  positive_into(w, "link_gbps", s.link_gbps);
  positive_into(w, "cross_link_gbps", s.cross_link_gbps);
  w.reject_unknown();
  sc.weight_sync = s;
}

void read_rl(table_reader& r, fabric_scenario& sc) {
  rl_section s;
  int_into(r, "iterations", s.iterations, 1);
  int_into(r, "ep", s.ep, 2);
  int_into(r, "dp", s.dp, 1);
  positive_into(r, "gb_a2a", s.gb_a2a);
  positive_into(r, "gb_grad", s.gb_grad);
  positive_into(r, "gb_weights", s.gb_weights);
  positive_into(r, "compute_s", s.compute_s);
  int_into(r, "gen_ranks", s.gen_ranks, 2);
  int capacity = sc.shape.pods * sc.shape.racks_per_pod * sc.shape.servers_per_rack
                 * sc.shape.gpus_per_server;
  if (s.ep * s.dp + s.gen_ranks > capacity)
    r.error("gen_ranks", fmt::format("{} Train and {} Gen ranks do not fit the fabric's {} GPUs",
                                     s.ep * s.dp, s.gen_ranks, capacity));
  r.reject_unknown();
  sc.rl = s;
}

void read_moe(table_reader& m, fabric_scenario& sc) {
  moe_setup s;
  int_into(m, "servers", s.region.servers, 2);
  int_into(m, "gpus_per_server", s.region.gpus_per_server, 1);
  int_into(m, "ocs_nics", s.region.ocs_nics, 1);
  positive_into(m, "link_gbps", s.region.link_gbps);
  int_into(m, "layers", s.layers, 2);
  int_into(m, "iterations", s.iterations, 1);
  int_into(m, "window", s.window, 1);
  positive_into(m, "decay", s.decay);
  positive_into(m, "tokens", s.tokens);
  positive_into(m, "gb_per_rank", s.gb_per_rank);
  if (auto v = non_negative(m, "popularity_drift", m.optional<double>("popularity_drift",
                                                                       s.popularity_drift)))
    s.popularity_drift = *v;
  if (auto v = non_negative(m, "skew", m.optional<double>("skew", s.skew)))
    s.skew = *v;
  positive_into(m, "transition_sharpness", s.transition_sharpness);
  if (auto v = one_of<moe_traffic>(m, "traffic", m.optional<std::string>("traffic", "markov")))
    s.traffic = *v;
  positive_into(m, "zipf_exponent", s.zipf_exponent);
  if (auto v = within(m, "affinity", m.optional<double>("affinity", s.affinity), 0.0, 1.0))
    s.affinity = *v;
  if (auto v = at_least<double>(m, "capacity_factor",
                                m.optional<double>("capacity_factor", s.capacity_factor), 1.0))
    s.capacity_factor = *v;
  int_into(m, "popularity_swaps", s.popularity_swaps, 0);
  if (auto v = within(m, "burst_rate", m.optional<double>("burst_rate", s.burst_rate), 0.0, 1.0))
    s.burst_rate = *v;
  int_into(m, "burst_iterations", s.burst_iterations, 1);
  positive_into(m, "burst_factor", s.burst_factor);
  if (s.region.ocs_nics > s.region.gpus_per_server)
    m.error("ocs_nics", fmt::format("{} OCS NICs of a server with {}", s.region.ocs_nics,
                                    s.region.gpus_per_server));
  m.reject_unknown();
  sc.moe = s;
}

void read_moe_sweep(table_reader& w, fabric_scenario& sc) {
  auto& s = sc.moe_sweep;
  ints_into(w, "servers", s.servers, 2);
  ints_into(w, "ocs_nics", s.ocs_nics, 1);
  int_into(w, "iterations", s.iterations, 2);
  w.reject_unknown();
}

void read_fabric_scenario(table_reader& root, fabric_scenario& sc, const std::string&,
                          std::vector<config_error>&) {
  if (auto head = root.required_table("scenario")) {
    if (auto v = head->required<std::string>("name"))
      sc.name = *v;
    if (auto v = head->required<std::string>("kind"); v && *v != "fabric")
      head->error("kind", fmt::format("'{}' is not \"fabric\"", *v));
    read_seeds(*head, sc.seed, sc.seeds);
    head->reject_unknown();
  }
  if (auto f = root.table("fabric"))
    read_shape(*f, sc.shape);
  for (auto& c : root.table_array("collectives"))
    read_collective(c, sc);
  if (auto w = root.table("collectives_sweep"))
    read_sweep(*w, sc);
  if (auto w = root.table("moe_sweep"))
    read_moe_sweep(*w, sc);
  if (!sc.collectives.empty())
    sc.policies.push_back("collectives");
  if (auto c = root.table("cost")) {
    read_cost(*c, sc);
    sc.policies.push_back("cost");
  }
  if (auto o = root.table("opus")) {
    read_opus(*o, sc);
    sc.policies.push_back("opus");
  }
  if (auto w = root.table("weight_sync")) {
    read_weight_sync(*w, sc);
    sc.policies.push_back("weight-sync");
  }
  if (auto r = root.table("rl")) {
    read_rl(*r, sc);
    sc.policies.push_back("rl");
  }
  if (auto m = root.table("moe")) {
    read_moe(*m, sc);
    sc.policies.push_back("moe");
  }
  if (sc.policies.empty())
    root.error("scenario", "a fabric scenario needs at least one of [[collectives]], [cost], "
                           "[opus], [weight_sync], [rl], [moe]");
}

} // namespace

scenario_result<fabric_scenario> load_fabric_scenario(const std::string& path) {
  return load_scenario_file<fabric_scenario>(path, read_fabric_scenario);
}

} // namespace loom::replay
