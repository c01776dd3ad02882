#define BOOST_TEST_MODULE config
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <regex>
#include <sstream>
#include <set>
#include <string>

#include <fmt/format.h>

#include "config/config.hpp"
#include "config/expand.hpp"
#include "tests/support/process.hpp"

using namespace loom;

namespace {

/// The embedded defaults with `from` replaced by `to` (which must occur exactly once).
std::string mutate(const std::string& from, const std::string& to) {
  std::string text{embedded_config_text()};
  auto pos = text.find(from);
  BOOST_REQUIRE_MESSAGE(pos != std::string::npos, "fixture text not found: " << from);
  BOOST_REQUIRE_MESSAGE(text.find(from, pos + 1) == std::string::npos, "ambiguous: " << from);
  return text.replace(pos, from.size(), to);
}

/// 1-based line of the first occurrence of `needle` in `text`.
int line_of(const std::string& text, const std::string& needle) {
  auto pos = text.find(needle);
  BOOST_REQUIRE(pos != std::string::npos);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

/// Parses `text` and requires exactly one error, at `line`, for `key`, mentioning `message`.
void expect_one_error(const std::string& text, int line, const std::string& key,
                      const std::string& message) {
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_REQUIRE_EQUAL(result.errors.size(), 1u);
  auto& e = result.errors.front();
  BOOST_TEST_INFO("error: " << e.to_string());
  BOOST_CHECK_EQUAL(e.file, "test.toml");
  BOOST_CHECK_EQUAL(e.line, line);
  BOOST_CHECK_EQUAL(e.key, key);
  BOOST_CHECK_MESSAGE(e.message.find(message) != std::string::npos,
                      "'" << e.message << "' lacks '" << message << "'");
  auto rendered = e.to_string();
  BOOST_CHECK(rendered.rfind("test.toml:" + std::to_string(line) + ":", 0) == 0);
}

} // namespace

BOOST_AUTO_TEST_SUITE(valid)

BOOST_AUTO_TEST_CASE(every_enum_name_is_unique_and_reads_back) {
  auto check = [](auto values) {
    using E = typename decltype(values)::value_type;
    std::set<std::string_view> seen;
    for (E v : values) {
      auto name = to_string(v);
      BOOST_CHECK_MESSAGE(seen.insert(name).second, "name used twice: " << name);
      BOOST_CHECK(parse_name<E>(name) == v);
    }
    BOOST_CHECK(!parse_name<E>("no-such-name"));
  };
  check(all_values<worker_role>());
  check(all_values<log_level>());
  check(all_values<fabric_kind>());
  check(all_values<ocs_tier>());
  check(all_values<driver_kind>());
  check(all_values<pool_kind>());
  BOOST_CHECK_EQUAL(names_of<driver_kind>(), "emulated, tl1, zmq");
  BOOST_CHECK_EQUAL(fmt::format("{}", worker_role::gen_instance), "gen-instance");
}

BOOST_AUTO_TEST_CASE(embedded_defaults_load) {
  auto result = parse_config(embedded_config_text(), "<embedded>");
  BOOST_REQUIRE_MESSAGE(result.value, (result.errors.empty() ? "" : result.errors[0].to_string()));
  auto& c = *result.value;
  BOOST_CHECK_EQUAL(c.cluster.rollout.size(), 2u);
  BOOST_CHECK_EQUAL(c.cluster.rollout[1].id, "h20-1");
  BOOST_CHECK_EQUAL(c.cluster.total_gpus(pool_kind::training), 16);
  BOOST_CHECK(c.fabric.kind == fabric_kind::rfabric);
  BOOST_CHECK_EQUAL(c.fabric.links.size(), 8u);
  BOOST_CHECK_EQUAL(c.fabric.links[7].a.device, "tor-pod0-r1");
  BOOST_CHECK_EQUAL(c.fabric.links[7].a.port, 12);
  BOOST_CHECK_EQUAL(c.fabric.links[7].b.port, 8);
  // Piezo (Polatis) reconfiguration delay from OrchestrRL Table 2 when none is configured.
  BOOST_CHECK_EQUAL(c.fabric.ocs.at(0).reconfig_ms, 25.0);
  BOOST_CHECK_EQUAL(c.policy.weave.tail_migration_threshold, 0.8);
}

BOOST_AUTO_TEST_CASE(a_reload_names_the_settings_that_changed) {
  const std::string text{embedded_config_text()};
  auto before = parse_config(text, "<embedded>");
  auto edit = [&](std::string from, std::string to) {
    auto t = text;
    auto at = t.find(from);
    BOOST_REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    auto r = parse_config(t, "<embedded>");
    BOOST_REQUIRE_MESSAGE(r.value, (r.errors.empty() ? "" : r.errors[0].to_string()));
    return *r.value;
  };
  BOOST_REQUIRE(before.value);
  BOOST_CHECK(changed_settings(*before.value, *before.value, {}).empty());
  auto quieter = edit("log_level = \"info\"", "log_level = \"warn\"");
  BOOST_CHECK(changed_settings(*before.value, quieter, {"service.log_level"}).empty());
  BOOST_CHECK(changed_settings(*before.value, quieter, {})
              == std::vector<std::string>{"service.log_level"});
  auto threshold = edit("tail_migration_threshold = 0.8", "tail_migration_threshold = 0.7");
  BOOST_CHECK(changed_settings(*before.value, threshold, {})
              == std::vector<std::string>{"policy.weave"});
}

BOOST_AUTO_TEST_CASE(generation_deployments_default_to_the_policy_knobs) {
  auto result = parse_config(embedded_config_text(), "<embedded>");
  BOOST_REQUIRE(result.value);
  BOOST_REQUIRE_EQUAL(result.value->generation.size(), 1u);
  auto& d = result.value->generation[0];
  BOOST_CHECK_EQUAL(d.name, "local-gen");
  BOOST_CHECK_EQUAL(d.model, "Qwen2.5-14B");
  BOOST_CHECK_EQUAL(d.gpus, 16);
  BOOST_CHECK_EQUAL(d.gpus_per_engine(), 8);
  BOOST_CHECK(d.initial == parallel_config{4});
  BOOST_CHECK_EQUAL(d.period_s, 30.0);   // [policy.planner] period_s
  BOOST_CHECK_EQUAL(d.tick_s, 0.5);      // [policy.balancer] tick_ms
  BOOST_CHECK_EQUAL(d.balancer.theta, 0.25);
  BOOST_CHECK_EQUAL(d.planner.epsilon_s, 2.0);
  BOOST_CHECK_EQUAL(d.planner.standby_restart_s, 1.35);
  auto tuned = parse_config(mutate("max_tokens = 16384 ", "max_tokens = 16384\nperiod_s = 5\n"
                                                           "tick_ms = 100\ntheta = 0.1 "),
                            "test.toml");
  BOOST_REQUIRE(tuned.value);
  BOOST_CHECK_EQUAL(tuned.value->generation[0].period_s, 5.0);
  BOOST_CHECK_EQUAL(tuned.value->generation[0].tick_s, 0.1);
  BOOST_CHECK_EQUAL(tuned.value->generation[0].balancer.theta, 0.1);
  BOOST_CHECK(d.dispatch == dispatch_mode::round_robin);
  auto chunked = parse_config(mutate("dispatch = \"round-robin\"", "dispatch = \"contiguous\" "),
                              "test.toml");
  BOOST_REQUIRE(chunked.value);
  BOOST_CHECK(chunked.value->generation[0].dispatch == dispatch_mode::contiguous);
}

BOOST_AUTO_TEST_CASE(weave_testbed_matches_the_paper) {
  auto result = load_config_file(loom::test::source_path("conf/weave-testbed.toml"));
  BOOST_REQUIRE_MESSAGE(result.value, (result.errors.empty() ? "" : result.errors[0].to_string()));
  auto& cl = result.value->cluster;
  // WEAVE §6: 328 H20 and 328 H800 GPUs, 20 Gbps between the clusters, H800 2.85x the H20.
  BOOST_CHECK_EQUAL(cl.rollout.size(), 41u);
  BOOST_CHECK_EQUAL(cl.training.size(), 41u);
  BOOST_CHECK_EQUAL(cl.total_gpus(pool_kind::rollout), 328);
  BOOST_CHECK_EQUAL(cl.total_gpus(pool_kind::training), 328);
  BOOST_CHECK_EQUAL(cl.cross_link_gbps, 20.0);
  BOOST_CHECK_EQUAL(cl.rollout.front().id, "r-h20-00");
  BOOST_CHECK_EQUAL(cl.rollout.back().id, "r-h20-40");
  auto ratio = cl.find_gpu("H800")->cost_per_gpu_hour / cl.find_gpu("H20")->cost_per_gpu_hour;
  BOOST_CHECK_CLOSE(ratio, 2.85, 0.5); // the paper rounds 5.28 / 1.85 = 2.854
}

BOOST_AUTO_TEST_CASE(gpu_overrides_and_new_types) {
  auto text = mutate("[cluster.gpus.H20]\ncost_per_gpu_hour = 1.85",
                     "[cluster.gpus.H20]\ncost_per_gpu_hour = 2.5\n\n"
                     "[cluster.gpus.B200]\nbf16_tflops = 2250\nhbm_gb = 192\nhbm_tbps = 8\n"
                     "nvlink_gbps = 900\ncost_per_gpu_hour = 9");
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(result.value);
  auto& cl = result.value->cluster;
  BOOST_CHECK_EQUAL(cl.find_gpu("H20")->cost_per_gpu_hour, 2.5);
  BOOST_CHECK_EQUAL(cl.find_gpu("H20")->hbm_gb, 96.0); // untouched field keeps the built-in
  BOOST_CHECK_EQUAL(cl.find_gpu("B200")->hbm_gb, 192.0);
  BOOST_CHECK_EQUAL(cl.cost_per_hour(pool_kind::rollout), 2 * 8 * 2.5);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(ha_defaults_from_the_gateway_and_the_cluster) {
  std::string text{embedded_config_text()};
  text += "\n[ha]\nendpoints = [\"http://127.0.0.1:2379\", \"https://etcd-b:2379\"]\n"
          "name = \"loom-a\"\n";
  auto r = parse_config(text, "test.toml");
  BOOST_REQUIRE_MESSAGE(r.value, (r.errors.empty() ? "" : r.errors[0].to_string()));
  BOOST_REQUIRE(r.value->ha);
  auto& ha = *r.value->ha;
  BOOST_CHECK_EQUAL(ha.endpoints.size(), 2u);
  BOOST_CHECK_EQUAL(ha.advertise, r.value->endpoints.gateway);
  BOOST_CHECK_EQUAL(ha.prefix, "/loom/local");
  BOOST_CHECK_EQUAL(ha.lease_ttl_s, 5u);
  BOOST_CHECK(!parse_config(embedded_config_text(), "test.toml").value->ha);
}

BOOST_AUTO_TEST_SUITE(invalid)

BOOST_AUTO_TEST_CASE(ha_settings_name_file_line_and_key) {
  // conf/loom.toml documents [ha] in comments: each line is looked for in what is appended.
  const std::string base{embedded_config_text()};
  auto with = [&](const std::string& body) { return base + "\n[ha]\nname = \"a\"\n" + body; };
  auto line_of = [&](const std::string& text, const std::string& needle) {
    auto pos = text.find(needle, base.size());
    BOOST_REQUIRE(pos != std::string::npos);
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + long(pos), '\n'));
  };
  auto text = with("endpoints = [\"127.0.0.1:2379\"]\n");
  expect_one_error(text, line_of(text, "endpoints = [\"127"), "ha.endpoints",
                   "not an etcd client URL");
  text = with("endpoints = [\"http://e:2379\", \"http://e:2379\"]\n");
  expect_one_error(text, line_of(text, "endpoints = [\"http://e"), "ha.endpoints", "twice");
  text = with("endpoints = [\"http://e:2379\"]\nlease_ttl_s = 2\nrequest_timeout_ms = 1500\n");
  expect_one_error(text, line_of(text, "request_timeout_ms"), "ha.request_timeout_ms",
                   "over half of lease_ttl_s");
  text = with("endpoints = [\"http://e:2379\"]\nadvertise = \"tcp://0.0.0.0:5555\"\n");
  expect_one_error(text, line_of(text, "advertise"), "ha.advertise", "no address a client");
  text = with("endpoints = [\"http://e:2379\"]\nprefix = \"loom/\"\n");
  expect_one_error(text, line_of(text, "prefix"), "ha.prefix", "not a key prefix");
  text = with("endpoints = [\"http://e:2379\"]\nlease_ttl_s = 1\n");
  expect_one_error(text, line_of(text, "lease_ttl_s"), "ha.lease_ttl_s", "2..600");
  text = with("endpoints = [\"http://e:2379\"]\nleader = true\n");
  expect_one_error(text, line_of(text, "leader = true"), "ha.leader", "unknown key");
}

BOOST_AUTO_TEST_CASE(syntax_error_names_line) {
  auto text = mutate("name = \"local\"", "name = \"local");
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_REQUIRE_EQUAL(result.errors.size(), 1u);
  BOOST_CHECK_EQUAL(result.errors[0].line, line_of(text, "name = \"local"));
}

BOOST_AUTO_TEST_CASE(unknown_key) {
  auto text = mutate("sync_writes = true", "sync_writes = true\nsync_wrties = false");
  expect_one_error(text, line_of(text, "sync_wrties"), "storage.sync_wrties", "unknown key");
}

BOOST_AUTO_TEST_CASE(unknown_table) {
  auto text = mutate("[policy.fabric]", "[policy.fabrik]");
  expect_one_error(text, line_of(text, "[policy.fabrik]"), "policy.fabrik", "unknown key");
}

BOOST_AUTO_TEST_CASE(wrong_type) {
  auto text = mutate("gpu = \"H800\"\ngpus = 8", "gpu = \"H800\"\ngpus = \"eight\"");
  expect_one_error(text, line_of(text, "gpus = \"eight\""), "cluster.training[0].gpus",
                   "expected an integer, got a string");
}

BOOST_AUTO_TEST_CASE(missing_required_key) {
  auto text = mutate("path = \"var/loom\"                  # RocksDB directory, relative to "
                     "the working directory\n",
                     "");
  expect_one_error(text, line_of(text, "[storage]"), "storage.path", "missing required key");
}

BOOST_AUTO_TEST_CASE(missing_required_table) {
  auto text = mutate("[endpoints]\ngateway = \"tcp://127.0.0.1:5555\"", "gateway_x = 1\n[e]");
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  bool found = false;
  for (auto& e : result.errors)
    found |= e.key == "endpoints" && e.message == "missing required table";
  BOOST_CHECK(found);
}

BOOST_AUTO_TEST_CASE(zero_gpus) {
  auto text = mutate("gpu = \"H20\"\ngpus = 8", "gpu = \"H20\"\ngpus = 0");
  expect_one_error(text, line_of(text, "gpus = 0"), "cluster.rollout[0].gpus",
                   "must be at least 1, got 0");
}

BOOST_AUTO_TEST_CASE(negative_cost) {
  auto text = mutate("cost_per_gpu_hour = 1.85", "cost_per_gpu_hour = -1.85");
  expect_one_error(text, line_of(text, "cost_per_gpu_hour = -1.85"),
                   "cluster.gpus.H20.cost_per_gpu_hour", "must be in [0, 1e+09], got -1.85");
}

BOOST_AUTO_TEST_CASE(duplicate_node_ids) {
  auto text = mutate("# RFabric (OrchestrRL", "[[cluster.training]]\nid = \"h20-{1..3}\"\n"
                     "gpu = \"H800\"\ngpus = 8\nhost_memory_gb = 1024\n\n# RFabric (OrchestrRL");
  expect_one_error(text, line_of(text, "id = \"h20-{1..3}\""), "cluster.training[1].id",
                   "duplicate node id 'h20-1' (first defined at line "
                     + std::to_string(line_of(text, "id = \"h20-{0..1}\"")) + ")");
}

BOOST_AUTO_TEST_CASE(link_to_missing_port) {
  auto text = mutate("to = \"agg-pod0:{5..8}\"", "to = \"agg-pod0:{30..33}\"");
  expect_one_error(text, line_of(text, "agg-pod0:{30..33}"), "fabric.links[1].to",
                   "port 33 does not exist on 'agg-pod0' (ports 1..32)");
}

BOOST_AUTO_TEST_CASE(link_port_used_twice) {
  auto text = mutate("to = \"agg-pod0:{5..8}\"", "to = \"agg-pod0:{4..7}\"");
  expect_one_error(text, line_of(text, "agg-pod0:{4..7}"), "fabric.links[1].to",
                   "port 4 of 'agg-pod0' is already linked at line "
                     + std::to_string(line_of(text, "agg-pod0:{1..4}")));
}

BOOST_AUTO_TEST_CASE(link_to_unknown_device) {
  auto text = mutate("from = \"tor-pod0-r1:{9..12}\"", "from = \"tor-pod9-r1:{9..12}\"");
  // One error per expanded link: four links name the missing ToR.
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_REQUIRE_EQUAL(result.errors.size(), 4u);
  for (auto& e : result.errors) {
    BOOST_CHECK_EQUAL(e.key, "fabric.links[1].from");
    BOOST_CHECK_EQUAL(e.message, "'tor-pod9-r1' names no ToR or OCS device");
  }
}

BOOST_AUTO_TEST_CASE(link_that_is_not_rfabric_wiring) {
  // A ToR straight into another ToR: RFabric ToRs go up into their PoD's OCS-Agg only.
  auto text = mutate("to = \"agg-pod0:{5..8}\"", "to = \"tor-pod0-r0:{1..4}\"");
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_REQUIRE_EQUAL(result.errors.size(), 4u);
  for (auto& e : result.errors) {
    BOOST_CHECK_EQUAL(e.line, line_of(text, "tor-pod0-r0:{1..4}"));
    BOOST_CHECK_EQUAL(e.key, "fabric.links[1].to");
    BOOST_CHECK(e.message.find("not ToR 'tor-pod0-r1' to ToR 'tor-pod0-r0'") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(two_tors_for_one_nic) {
  auto text = mutate("id = \"tor-pod0-r1\"\npod = \"pod0\"\nrail = 1",
                     "id = \"tor-pod0-r1\"\npod = \"pod0\"\nrail = 0");
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_CHECK(std::any_of(result.errors.begin(), result.errors.end(), [](auto& e) {
    return e.message.find("NIC 0 of server 'h20-0' already hangs off ToR 'tor-pod0-r0'")
           != std::string::npos;
  }));
}

BOOST_AUTO_TEST_CASE(unknown_client_role) {
  auto text = mutate("ocs-agent = []", "pilot = []");
  expect_one_error(text, line_of(text, "pilot = []"), "security.clients.pilot", "unknown key");
}

BOOST_AUTO_TEST_CASE(unknown_gpu_type) {
  auto text = mutate("gpu = \"H800\"", "gpu = \"A100\"");
  expect_one_error(text, line_of(text, "\"A100\""), "cluster.training[0].gpu",
                   "unknown GPU type 'A100'");
}

BOOST_AUTO_TEST_CASE(bad_enum_value) {
  auto text = mutate("tier = \"agg\" ", "tier = \"spine\" ");
  expect_one_error(text, line_of(text, "\"spine\""), "fabric.ocs[0].tier",
                   "'spine' is not one of: agg, core, regional, rail");
}

BOOST_AUTO_TEST_CASE(threshold_out_of_range) {
  auto text = mutate("tail_migration_threshold = 0.8", "tail_migration_threshold = 1.2");
  expect_one_error(text, line_of(text, "= 1.2"), "policy.weave.tail_migration_threshold",
                   "must be in (0, 1], got 1.2");
}

BOOST_AUTO_TEST_CASE(server_outside_cluster) {
  auto text = mutate("servers = [\"h20-{0..1}\", ", "servers = [\"h20-{0..2}\", ");
  expect_one_error(text, line_of(text, "h20-{0..2}"), "fabric.pods[0].servers",
                   "server 'h20-2' is not a node of the cluster");
}

BOOST_AUTO_TEST_CASE(bad_endpoint) {
  auto text = mutate("metrics = \"127.0.0.1:9464\"", "metrics = \"127.0.0.1:99999\"");
  expect_one_error(text, line_of(text, "99999"), "endpoints.metrics",
                   "is not HOST:PORT with a port in 0..65535");
}

BOOST_AUTO_TEST_CASE(generation_deployment_errors_name_their_key) {
  struct bad {
    std::string from, to, needle, key, message;
  };
  for (auto& b : std::vector<bad>{
         {"model = \"Qwen2.5-14B\" ", "model = \"GPT-5\" ", "GPT-5",
          "generation.deployments[0].model", "'GPT-5' is not a model the engine model knows"},
         {"gpu = \"H20\"  ", "gpu = \"TPU\"  ", "\"TPU\"", "generation.deployments[0].gpu",
          "unknown GPU type 'TPU'"},
         {"gpus = 16 ", "gpus = 12 ", "gpus = 12", "generation.deployments[0].gpus",
          "must be a whole number of engines of gpus_per_node = 8 GPUs, got 12"},
         {"initial = \"TP4\" ", "initial = \"TP3\" ", "TP3", "generation.deployments[0].initial",
          "TP3 takes 3 GPUs"},
         {"initial = \"TP4\" ", "initial = \"MP4\" ", "MP4", "generation.deployments[0].initial",
          "'MP4' is not a parallel config"},
         {"model = \"Qwen2.5-14B\" ", "model = \"Qwen3-235B-A22B\" ", "initial = \"TP4\"",
          "generation.deployments[0].initial", "Qwen3-235B-A22B's weights do not fit TP4"},
         {"name = \"local-gen\"", "name = \"local gen\"", "local gen",
          "generation.deployments[0].name", "is not a deployment name"},
         {"command_retries = 2 ", "command_retries = 99 ", "= 99",
          "generation.deployments[0].command_retries", "must be at most 10, got 99"},
         {"standby_restart_s = 1.35 ", "standby_restart_s = -1.0 ", "= -1.0",
          "generation.deployments[0].standby_restart_s", "must be in [0,"},
         {"dispatch = \"round-robin\"", "dispatch = \"sideways\"   ", "sideways",
          "generation.deployments[0].dispatch",
          "'sideways' is not one of: round-robin, contiguous"},
       }) {
    auto text = mutate(b.from, b.to);
    BOOST_TEST_CONTEXT(b.to) { expect_one_error(text, line_of(text, b.needle), b.key, b.message); }
  }
  // A second deployment of the same name.
  std::string text{embedded_config_text()};
  auto at = text.find("[[generation.deployments]]");
  text += "\n" + text.substr(at, text.find("\n", text.find("initial =")) - at) + "\n";
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_REQUIRE_EQUAL(result.errors.size(), 1u);
  BOOST_CHECK_EQUAL(result.errors[0].key, "generation.deployments[1].name");
  BOOST_CHECK(result.errors[0].message.find("local-gen") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_deployment_takes_an_engine_profile_of_its_model_and_gpu) {
  const auto bundled = loom::test::source_path("conf/profiles/h800-qwen2.5-14b.toml");
  auto on_h800 = mutate("gpu = \"H20\"  ", "gpu = \"H800\"\nprofile = \"" + bundled + "\" ");
  on_h800.replace(on_h800.find("memory_utilization = 0.9"), 24, "memory_utilization = 0.5");
  auto good = parse_config(on_h800, "test.toml");
  BOOST_REQUIRE_MESSAGE(good.value, (good.errors.empty() ? "" : good.errors[0].to_string()));
  auto& d = good.value->generation[0];
  BOOST_REQUIRE(d.profile);
  BOOST_CHECK(d.profile->find(parallel_config{4}));
  BOOST_CHECK_EQUAL(d.memory_utilization, 0.5);
  // The bundled profile is the H800's: on the embedded H20 deployment it is refused.
  auto h20 = mutate("gpus = 16 ", "gpus = 16\nprofile = \"" + bundled + "\" ");
  expect_one_error(h20, line_of(h20, "profile ="), "generation.deployments[0].profile",
                   "profiles Qwen2.5-14B on H800, not Qwen2.5-14B on H20");
  auto missing = mutate("gpus = 16 ", "gpus = 16\nprofile = \"/nonexistent/p.toml\" ");
  expect_one_error(missing, line_of(missing, "profile ="), "generation.deployments[0].profile",
                   "/nonexistent/p.toml");
}

/// The embedded defaults with the OCS-Agg driven over TL1 by `settings`.
std::string tl1_device(const std::string& settings) {
  return mutate("driver = \"emulated\"", "driver = \"tl1\"\n" + settings + "\n#");
}

BOOST_AUTO_TEST_CASE(tl1_devices_need_an_address_and_a_login_file) {
  loom::test::temp_dir dir;
  loom::test::write_file(dir / "good.cred", "# operator\n\nops:s3:cret\n");
  loom::test::write_file(dir / "empty.cred", "# nothing here\n");
  const auto good = "credentials = \"" + dir / "good.cred" + "\"";
  struct bad {
    std::string settings, needle, key, message;
  };
  for (auto& b : std::vector<bad>{
         {"address = \"127.0.0.1:3082\"", "[[fabric.ocs]]", "fabric.ocs[0].credentials",
          "missing required key"},
         {"address = \"127.0.0.1:3082\"\ncredentials = \"" + dir / "none.cred" + "\"",
          "none.cred", "fabric.ocs[0].credentials", "cannot read"},
         {"address = \"127.0.0.1:3082\"\ncredentials = \"" + dir / "empty.cred" + "\"",
          "empty.cred", "fabric.ocs[0].credentials", "holds no USER:PASSWORD line"},
         {"address = \"127.0.0.1:0\"\n" + good, "127.0.0.1:0", "fabric.ocs[0].address",
          "a port in 1..65535"},
         {"address = \"127.0.0.1:3082\"\n" + good + "\ntimeout_ms = 0", "timeout_ms",
          "fabric.ocs[0].timeout_ms", "must be in 1..600000"},
       }) {
    auto text = tl1_device(b.settings);
    BOOST_TEST_CONTEXT(b.settings) {
      expect_one_error(text, line_of(text, b.needle), b.key, b.message);
    }
  }
  // A login file relative to the config file, and the TL1 settings, as written.
  loom::test::write_file(dir / "loom.toml",
                         tl1_device("address = \"10.0.0.7:3082\"\ncredentials = \"good.cred\"\n"
                                    "timeout_ms = 750\nattempts = 5"));
  auto result = load_config_file(dir / "loom.toml");
  BOOST_REQUIRE_MESSAGE(result.value,
                        (result.errors.empty() ? std::string{} : result.errors[0].to_string()));
  auto& dev = result.value->fabric.ocs.front();
  BOOST_CHECK_EQUAL(dev.address, "10.0.0.7:3082");
  BOOST_CHECK_EQUAL(dev.user, "ops");
  BOOST_CHECK_EQUAL(dev.password, "s3:cret");
  BOOST_CHECK_EQUAL(dev.timeout_ms, 750);
  BOOST_CHECK_EQUAL(dev.attempts, 5);
}

BOOST_AUTO_TEST_CASE(a_driver_that_cannot_run_is_refused) {
  // An agent-driven device with no key an agent could register with.
  auto text = mutate("driver = \"emulated\"", "driver = \"zmq\"\n#");
  expect_one_error(text, line_of(text, "[security]"), "security", "lists no ocs-agent key");
  // TL1 settings on it are not its own: the agent has the switch's address and login.
  auto wrong = mutate("driver = \"emulated\"", "driver = \"zmq\"\naddress = \"10.0.0.7:3082\"\n#");
  auto result = parse_config(wrong, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_CHECK(std::any_of(result.errors.begin(), result.errors.end(), [](auto& e) {
    return e.key == "fabric.ocs[0].address" && e.message.find("unknown key") != std::string::npos;
  }));
}

BOOST_AUTO_TEST_CASE(an_agent_driven_device_runs_with_an_agent_key) {
  loom::test::temp_dir dir;
  loom::test::write_file(dir / "agent.pub", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n"); // Z85
  auto text = mutate("driver = \"emulated\"", "driver = \"zmq\"\ntimeout_ms = 300\nlink_up_ms = 2.5\n#");
  text = text.replace(text.find("ocs-agent = []"), 14, "ocs-agent = [\"" + dir / "agent.pub" + "\"]");
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE_MESSAGE(result.value,
                        (result.errors.empty() ? std::string{} : result.errors[0].to_string()));
  auto& dev = result.value->fabric.ocs.front();
  BOOST_CHECK(dev.driver == driver_kind::zmq);
  BOOST_CHECK_EQUAL(dev.timeout_ms, 300);
  BOOST_CHECK_EQUAL(dev.link_up_ms, 2.5);
}

BOOST_AUTO_TEST_CASE(every_error_is_reported) {
  auto text = mutate("gpu = \"H20\"\ngpus = 8", "gpu = \"H20\"\ngpus = 0");
  text += "\n[surprise]\nx = 1\n";
  auto result = parse_config(text, "test.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_CHECK_EQUAL(result.errors.size(), 2u);
}

BOOST_AUTO_TEST_CASE(missing_file) {
  auto result = load_config_file("/nonexistent/loom.toml");
  BOOST_REQUIRE(!result.value);
  BOOST_CHECK_EQUAL(result.errors.at(0).message, "cannot open file");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ranges)

BOOST_AUTO_TEST_CASE(expansion) {
  auto plain = std::get<std::vector<std::string>>(expand_range("pod0"));
  BOOST_CHECK_EQUAL(plain.size(), 1u);
  auto r = std::get<std::vector<std::string>>(expand_range("n{8..11}x"));
  BOOST_CHECK_EQUAL(r.size(), 4u);
  BOOST_CHECK_EQUAL(r.front(), "n8x");
  BOOST_CHECK_EQUAL(r.back(), "n11x");
  auto padded = std::get<std::vector<std::string>>(expand_range("r{00..10}"));
  BOOST_CHECK_EQUAL(padded.front(), "r00");
  BOOST_CHECK_EQUAL(padded.back(), "r10");
}

BOOST_AUTO_TEST_CASE(malformed) {
  for (auto bad : {"a{1..}", "a{3..1}", "a{1..2}{3..4}", "a{x..2}", "a}{", "a{1.2}"})
    BOOST_CHECK_MESSAGE(std::holds_alternative<std::string>(expand_range(bad)), bad);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(check_config_accepts_examples) {
  for (auto file : {"conf/loom.toml", "conf/weave-testbed.toml", "conf/mfabric-region.toml",
                    "conf/opus-rails.toml", "conf/rfabric-tl1.toml"}) {
    auto r = loom::test::run({loom::test::loom_binary(), "check-config",
                              loom::test::source_path(file)});
    BOOST_CHECK_MESSAGE(r.exit_code == 0, file << ": " << r.err);
    BOOST_CHECK(r.out.find(": ok: cluster") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(check_config_rejects_with_exit_2) {
  loom::test::temp_dir dir;
  auto text = mutate("gpu = \"H20\"\ngpus = 8", "gpu = \"H20\"\ngpus = 0");
  auto path = dir / "broken.toml";
  loom::test::write_file(path, text);
  auto r = loom::test::run({loom::test::loom_binary(), "check-config", path});
  BOOST_CHECK_EQUAL(r.exit_code, 2);
  auto where = path + ":" + std::to_string(line_of(text, "gpus = 0")) + ":";
  BOOST_CHECK_MESSAGE(r.err.find(where) != std::string::npos, r.err);
  BOOST_CHECK(r.err.find("cluster.rollout[0].gpus") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// The conf/ file's lines, with line `at` (0-based) holding `value` for its setting.
std::string with_value(const std::vector<std::string>& lines, size_t at, const std::string& value,
                       const std::smatch& m) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i)
    out += (i == at ? std::string{m[1]} + std::string{m[2]} + std::string{m[3]} + value
                        + std::string{m[5]}
                    : lines[i])
           + "\n";
  return out;
}

} // namespace

// Every numeric setting of every bundled config, given a wrong type, a non-finite number (real
// settings) or one past 32 bits (integer settings): an error at that line naming that key.
BOOST_AUTO_TEST_CASE(every_numeric_setting_refuses_wrong_types_non_finite_and_wrapping_values) {
  const std::regex setting{R"(^(\s*)([a-z_0-9]+)(\s*=\s*)(-?[0-9][0-9_.eE+-]*)(\s*(#.*)?)$)"};
  size_t cases = 0;
  for (auto name : {"loom.toml", "weave-testbed.toml", "rfabric-tl1.toml", "mfabric-region.toml",
                    "opus-rails.toml"}) {
    auto path = test::source_path(std::string{"conf/"} + name);
    std::vector<std::string> lines;
    std::istringstream in{test::read_file(path)};
    for (std::string l; std::getline(in, l);)
      lines.push_back(l);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_match(lines[i], m, setting))
        continue;
      std::string key = m[2], number = m[4];
      bool integer = number.find_first_of(".eE") == std::string::npos;
      std::vector<std::string> bad{"\"text\""};
      for (auto v : integer ? std::vector<std::string>{"4294967296", "9223372036854775807"}
                            : std::vector<std::string>{"inf", "-inf", "nan"})
        bad.push_back(v);
      for (auto& v : bad) {
        auto r = parse_config(with_value(lines, i, v, m), path);
        bool located = std::any_of(r.errors.begin(), r.errors.end(), [&](const config_error& e) {
          return e.line == int(i + 1) && e.column > 0 && e.key.size() >= key.size()
                 && e.key.compare(e.key.size() - key.size(), key.size(), key) == 0;
        });
        BOOST_CHECK_MESSAGE(!r.value && located,
                            name << ":" << i + 1 << ": " << key << " = " << v << " gave "
                                 << (r.errors.empty() ? "no error" : r.errors[0].to_string()));
        ++cases;
      }
    }
  }
  BOOST_TEST_MESSAGE(cases << " broken settings");
  BOOST_CHECK_GT(cases, 250u);
}
