#include "tests/support/live_service.hpp"

#include <cstdlib>
#include <stdexcept>

#include <map>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace loom::test {

namespace {

std::string env(const char* name) {
  auto* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string{name} + " is not set (run the tests via meson test)");
  return v;
}

/// Every role's keys: drivers, a rollout worker, a trainer, a collective shim, an OCS agent,
/// two inference engines and a router, and one nobody configured.
const std::vector<std::pair<std::string, std::string>>& key_roles() {
  static const std::vector<std::pair<std::string, std::string>> k{
    {"driver-a", "driver"}, {"driver-b", "driver"}, {"rollout-1", "rollout"},
    {"trainer-1", "train"}, {"shim", "collective-shim"}, {"agent", "ocs-agent"},
    {"engine-a", "gen-instance"}, {"engine-b", "gen-instance"}, {"router", "gen-router"},
    {"intruder", ""}};
  return k;
}

std::string fabric_text() {
  return R"([fabric]
kind = "rfabric"
link_gbps = 400
nics_per_server = 2
[[fabric.pods]]
id = "pod0"
servers = ["h20-{0..1}", "h800-{0..1}"]
[[fabric.tors]]
id = "tor-r0"
pod = "pod0"
rail = 0
ports = 16
[[fabric.tors]]
id = "tor-r1"
pod = "pod0"
rail = 1
ports = 16
[[fabric.ocs]]
id = "agg-pod0"
tier = "agg"
pod = "pod0"
ports = 32
technology = "piezo"
[[fabric.links]]
from = "tor-r0:{9..12}"
to = "agg-pod0:{1..4}"
[[fabric.links]]
from = "tor-r1:{9..12}"
to = "agg-pod0:{5..8}"
)";
}

std::string clients_text() {
  std::map<std::string, std::vector<std::string>> by_role;
  for (auto& [who, role] : key_roles())
    if (!role.empty())
      by_role[role].push_back(fmt::format("\"keys/{}.pub\"", who));
  std::string out = "[security.clients]\n";
  for (auto& [role, keys] : by_role)
    out += fmt::format("{} = [{}]\n", role, fmt::join(keys, ", "));
  return out;
}

} // namespace

live_service::live_service(live_options options) : options_(std::move(options)) {
  for (auto& [who, role] : key_roles()) {
    auto r = run({loom_binary(), "keygen", who, "--out", dir / "keys"});
    if (r.exit_code != 0)
      throw std::runtime_error("keygen failed: " + r.err);
  }
  auto text = fmt::format(R"([service]
name = "live-test"
[endpoints]
gateway = "tcp://127.0.0.1:{}"
metrics = "127.0.0.1:0"
[storage]
path = "{}"
[cluster]
name = "c"
cross_link_gbps = 20.0
[[cluster.rollout]]
id = "h20-{{0..{}}}"
gpu = "H20"
gpus = 8
host_memory_gb = 1024
[[cluster.training]]
id = "h800-{{0..{}}}"
gpu = "H800"
gpus = 8
host_memory_gb = 1024
{}[security]
heartbeat_ms = 200
heartbeat_misses = 15  # 3 s: a loaded 2-core machine must not fail a live worker
{}{}{}
)",
                          port, dir / "db", options_.rollout_nodes - 1,
                          options_.training_nodes - 1,
                          options_.fabric ? fabric_text() : "", options_.security,
                          clients_text(), options_.extra);
  write_file(config, text);
}

std::string live_service::endpoint() const {
  return "tcp://127.0.0.1:" + std::to_string(port);
}

std::string live_service::job_file(const std::string& name, int iterations) const {
  auto path = dir / (name + ".toml");
  write_file(path, fmt::format(R"(name = "{}"
model = "Qwen2.5-7B"
rollout_gpus = 8
training_gpus = 8
max_response_tokens = 8192
batch_size = 64
rollout_host_memory_gb = 1
training_host_memory_gb = 1
worst_rollout_s = {}
worst_training_s = {}
model_gb = 0.1
slo = 4.0
iterations = {}
)",
                               name, options_.worst_s, options_.worst_s,
                               iterations < 0 ? options_.iterations : iterations));
  return path;
}

run_result live_service::admin(std::vector<std::string> args) const {
  std::vector<std::string> argv{loom_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("-c");
  argv.push_back(config);
  return run(argv);
}

std::unique_ptr<child_process> live_service::serve() const {
  auto p = std::make_unique<child_process>(
    std::vector<std::string>{loom_binary(), "serve", "-c", config});
  auto ready = p->read_until(
    true, [](const std::string& l) { return l.find("event=serve_ready") != std::string::npos; },
    live_limit);
  if (!ready)
    throw std::runtime_error("serve did not get ready:\n" + p->stderr_text());
  return p;
}

std::unique_ptr<child_process> live_service::cpp_worker(const std::string& who,
                                                        const std::string& job,
                                                        const std::string& role, int iterations,
                                                        int phase_ms) const {
  return std::make_unique<child_process>(std::vector<std::string>{
    env("LOOM_EXAMPLE_WORKER"), "--endpoint", endpoint(), "--server-key",
    dir / "db/keys/server.pub", "--key", dir / ("keys/" + who), "--job", job, "--role", role,
    "--iterations", std::to_string(iterations), "--phase-ms", std::to_string(phase_ms)});
}

std::unique_ptr<child_process> live_service::engine(const std::string& who,
                                                    std::vector<std::string> args) const {
  std::vector<std::string> argv{env("LOOM_EXAMPLE_ENGINE"), "--endpoint", endpoint(),
                                "--server-key", dir / "db/keys/server.pub", "--key",
                                dir / ("keys/" + who), "--engine-id", who};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<child_process>(argv);
}

std::unique_ptr<child_process> live_service::python_example(const std::string& script,
                                                            const std::string& who,
                                                            std::vector<std::string> args) const {
  std::vector<std::string> argv{"/usr/bin/env", "PYTHONPATH=" + env("LOOM_PYTHON_PATH"),
                                "/usr/bin/python3", source_path("python/examples/" + script),
                                "--endpoint", endpoint(), "--server-key",
                                dir / "db/keys/server.pub", "--key", dir / ("keys/" + who)};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<child_process>(argv);
}

client_options live_service::keys(const std::string& who) const {
  client_options o;
  o.endpoint = endpoint();
  o.server_public_key = read_key(dir / "db/keys/server.pub");
  auto prefix = who == "admin" ? dir / "db/keys/admin" : dir / ("keys/" + who);
  o.public_key = read_key(prefix + ".pub");
  o.secret_key = read_key(prefix + ".secret");
  // Long enough for a loaded machine: tests assert answers, not how fast they come.
  o.timeout = scaled(std::chrono::seconds{30});
  return o;
}

v1::Envelope cross_rail_all_reduce(const std::string& owner, uint32_t a, uint32_t b) {
  v1::Envelope e;
  auto* i = e.mutable_fabric_intent();
  i->set_owner(owner);
  i->set_stage("train");
  i->set_primitive("all-reduce");
  for (auto [server, gpu] : {std::pair{a, 0u}, std::pair{b, 4u}}) {
    auto* r = i->add_members();
    r->set_server(server);
    r->set_gpu(gpu);
  }
  i->set_bytes(1e9);
  i->set_window("stage-boundary");
  i->set_window_s(1.0);
  return e;
}

bool finished(child_process& w) {
  return w.read_until(
             false,
             [](const std::string& l) { return l.find("finished") != std::string::npos; },
             live_limit)
    .has_value();
}

int count_lines(const child_process& w, const std::string& prefix) {
  int n = 0;
  for (auto& l : w.stdout_lines())
    n += l.rfind(prefix, 0) == 0;
  return n;
}

std::vector<std::string> miscounted_grants(const child_process& w) {
  static const std::regex grant{R"(^grant \S+ \S+ iteration (\d+) .*loom_iteration (\d+))"};
  std::vector<std::string> out;
  for (auto& l : w.stdout_lines()) {
    std::smatch m;
    if (std::regex_search(l, m, grant) && std::stoll(m[1]) + 1 != std::stoll(m[2]))
      out.push_back(l);
  }
  return out;
}

} // namespace loom::test
