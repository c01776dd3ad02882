#define BOOST_TEST_MODULE gateway
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <map>

#include <zmq.hpp>

#include "loom.pb.h"
#include "loom/client.hpp"
#include "support/process.hpp"

using namespace loom;
namespace lt = loom::test;
using namespace std::chrono_literals;

namespace {

constexpr auto limit = 60s;

std::string env(const char* name) {
  auto* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string{name} + " is not set (run the tests via meson test)");
  return v;
}

/// A service directory: config (CURVE on, fast heartbeats, no cold-start wait), worker keys.
struct service_dir {
  lt::temp_dir dir;
  int port = lt::free_tcp_port();
  std::string config = dir / "loom.toml";

  service_dir() {
    for (auto name : {"worker-a", "worker-b", "intruder", "shim"}) {
      auto r = lt::run({lt::loom_binary(), "keygen", name, "--out", dir / "keys"});
      BOOST_REQUIRE_EQUAL(r.exit_code, 0);
    }
    lt::write_file(config, fmt_config());
    for (auto job : {"job-a", "job-b", "job-c", "job-d", "job-e"})
      lt::write_file(dir / (std::string{job} + ".toml"), fmt_job(job));
  }

  std::string fmt_config() const {
    return R"([service]
name = "gw-test"
[endpoints]
gateway = "tcp://127.0.0.1:)" + std::to_string(port) + R"("
metrics = "127.0.0.1:0"
[storage]
path = ")" + (dir / "db") + R"("
[cluster]
name = "c"
cross_link_gbps = 20.0
[[cluster.rollout]]
id = "h20-{0..1}"
gpu = "H20"
gpus = 8
host_memory_gb = 1024
[[cluster.training]]
id = "h800-{0..1}"
gpu = "H800"
gpus = 8
host_memory_gb = 1024
[policy.weave]
cold_start_init_s = 0.0
[fabric]
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
[security]
heartbeat_ms = 200
heartbeat_misses = 3
[security.clients]
rollout = ["keys/worker-a.pub", "keys/worker-b.pub"]
collective-shim = ["keys/shim.pub"]
)";
  }

  static std::string fmt_job(const std::string& name) {
    return "name = \"" + name + R"("
model = "Qwen2.5-7B"
rollout_gpus = 8
training_gpus = 8
max_response_tokens = 8192
batch_size = 64
rollout_host_memory_gb = 1
training_host_memory_gb = 1
worst_rollout_s = 1
worst_training_s = 1
model_gb = 0.1
slo = 4.0
)";
  }

  lt::run_result admin(std::vector<std::string> args) const {
    std::vector<std::string> argv{lt::loom_binary()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("-c");
    argv.push_back(config);
    return lt::run(argv);
  }

  std::unique_ptr<lt::child_process> serve() const {
    auto p = std::make_unique<lt::child_process>(
      std::vector<std::string>{lt::loom_binary(), "serve", "-c", config});
    auto ready = p->read_until(
      true, [](const std::string& l) { return l.find("event=serve_ready") != std::string::npos; },
      limit);
    BOOST_REQUIRE_MESSAGE(ready, "serve did not get ready:\n" << p->stderr_text());
    return p;
  }

  std::unique_ptr<lt::child_process> cpp_worker(const std::string& job, int iterations,
                                                int phase_ms) const {
    return std::make_unique<lt::child_process>(std::vector<std::string>{
      env("LOOM_EXAMPLE_WORKER"), "--endpoint", endpoint(), "--server-key",
      dir / "db/keys/server.pub", "--key", dir / "keys/worker-a", "--job", job, "--iterations",
      std::to_string(iterations), "--phase-ms", std::to_string(phase_ms)});
  }

  std::unique_ptr<lt::child_process> python_worker(const std::string& job, int iterations,
                                                   int phase_ms) const {
    return std::make_unique<lt::child_process>(std::vector<std::string>{
      "/usr/bin/env", "PYTHONPATH=" + env("LOOM_PYTHON_PATH"), "/usr/bin/python3",
      lt::source_path("python/examples/rollout_worker.py"), "--endpoint", endpoint(),
      "--server-key", dir / "db/keys/server.pub", "--key", dir / "keys/worker-b", "--job", job,
      "--iterations", std::to_string(iterations), "--phase-ms", std::to_string(phase_ms)});
  }

  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port); }

  client_options keys(const std::string& who) const {
    client_options o;
    o.endpoint = endpoint();
    o.server_public_key = read_key(dir / "db/keys/server.pub");
    auto prefix = who == "admin" ? dir / "db/keys/admin" : dir / ("keys/" + who);
    o.public_key = read_key(prefix + ".pub");
    o.secret_key = read_key(prefix + ".secret");
    o.timeout = 2s;
    return o;
  }
};

bool finished(lt::child_process& w) {
  return w.read_until(
             false, [](const std::string& l) { return l.find("finished") != std::string::npos; },
             limit)
    .has_value();
}

/// The job of each rollout grant the service logged, in order.
std::vector<std::string> rollout_grants(const std::vector<std::string>& log) {
  std::vector<std::string> out;
  for (auto& l : log)
    if (l.find("event=phase_granted") != std::string::npos
        && l.find("phase=rollout") != std::string::npos) {
      auto pos = l.find("job=") + 4;
      out.push_back(l.substr(pos, l.find(' ', pos) - pos));
    }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(two_jobs_share_a_group_through_real_workers_and_survive_failure_and_restart) {
  service_dir s;
  auto serve = s.serve();
  auto a = s.admin({"submit", s.dir / "job-a.toml"});
  auto b = s.admin({"submit", s.dir / "job-b.toml"});
  BOOST_REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  BOOST_CHECK(a.out.find("new_group in group g1") != std::string::npos);
  BOOST_CHECK(b.out.find("direct_packing in group g1") != std::string::npos);

  // A C++ worker runs job-a and a Python worker job-b: three meta-iterations each.
  auto wa = s.cpp_worker("job-a", 3, 100);
  auto wb = s.python_worker("job-b", 3, 100);
  BOOST_REQUIRE_MESSAGE(finished(*wa), "C++ worker:\n" << wa->stderr_text());
  BOOST_REQUIRE_MESSAGE(finished(*wb), "Python worker:\n" << wb->stderr_text());
  for (auto* w : {wa.get(), wb.get()}) {
    int grants = 0;
    for (auto& l : w->stdout_lines())
      grants += l.rfind("grant ", 0) == 0;
    BOOST_CHECK_EQUAL(grants, 9); // 3 iterations x rollout, training, sync
  }
  // Round robin (WEAVE §4.3): once both jobs run, the shared rollout pool alternates between
  // them (job-a may start a turn early while job-b is still staging).
  serve->read_until(true, [](const std::string&) { return false; }, 300ms);
  auto order = rollout_grants(serve->stderr_lines());
  auto first_b = std::find(order.begin(), order.end(), "job-b");
  BOOST_REQUIRE(first_b != order.end());
  BOOST_REQUIRE_GE(order.end() - first_b, 4);
  for (auto it = first_b + 1; it != first_b + 4; ++it)
    BOOST_CHECK_MESSAGE(*it != *(it - 1), "rollout grants repeat " << *it);
  // Both said their job is done: they left their group.
  auto done = s.admin({"jobs"});
  BOOST_CHECK(done.out.find("job-a  finished") != std::string::npos);

  // Two more jobs share a group; kill job-c's worker mid-run: after the heartbeat timeout
  // job-c fails alone and job-d goes on (WEAVE §5.3).
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.dir / "job-c.toml"}).exit_code, 0);
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.dir / "job-d.toml"}).exit_code, 0);
  auto doomed = s.cpp_worker("job-c", 1000, 100);
  auto survivor = s.python_worker("job-d", 5, 100);
  BOOST_REQUIRE(doomed->read_until(
    false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, limit));
  doomed->send_signal(SIGKILL);
  BOOST_REQUIRE(serve->read_until(
    true, [](const std::string& l) { return l.find("event=job_failed job=job-c") != std::string::npos; },
    limit));
  BOOST_REQUIRE_MESSAGE(finished(*survivor), "job-d's worker:\n" << survivor->stderr_text());
  auto job_c = s.admin({"job", "job-c", "--json"});
  BOOST_CHECK(job_c.out.find("\"state\": \"failed\"") != std::string::npos);
  BOOST_CHECK(job_c.out.find("stopped sending heartbeats") != std::string::npos);

  // Restart the service under a running worker: job-e comes back from RocksDB, the worker
  // re-registers, restarts the iteration it was in, and finishes.
  BOOST_REQUIRE_EQUAL(s.admin({"submit", s.dir / "job-e.toml"}).exit_code, 0);
  auto across = s.python_worker("job-e", 4, 300);
  BOOST_REQUIRE(across->read_until(
    false, [](const std::string& l) { return l.rfind("grant", 0) == 0; }, limit));
  serve->send_signal(SIGTERM);
  BOOST_REQUIRE(serve->wait(limit));
  serve = s.serve();
  BOOST_REQUIRE_MESSAGE(finished(*across), "worker across the restart:\n"
                                             << across->stderr_text());
  auto after = s.admin({"jobs"});
  BOOST_CHECK(after.out.find("job-e  finished") != std::string::npos);
  BOOST_CHECK(after.out.find("job-c  failed") != std::string::npos);
  BOOST_CHECK(after.out.find("job-a  finished") != std::string::npos);
  bool restarted = false;
  for (auto& l : across->stdout_lines())
    restarted |= l.rfind("restart job-e", 0) == 0;
  auto seen = [](const std::string& l) {
    return l.find("event=scheduler_restored") != std::string::npos;
  };
  bool readmitted = std::any_of(serve->stderr_lines().begin(), serve->stderr_lines().end(), seen)
                    || serve->read_until(true, seen, limit).has_value();
  BOOST_CHECK(readmitted);
  // SIGTERM came while the worker ran a phase: its next call (the release) reached the new
  // service, which had no session for it, so it registered again and restarted the iteration.
  BOOST_CHECK_MESSAGE(restarted, "the worker never restarted its iteration:\n"
                                   << across->stderr_text());
  auto registered_again = [](const std::string& l) {
    return l.find("event=worker_registered") != std::string::npos
           && l.find("job=job-e") != std::string::npos;
  };
  BOOST_CHECK(std::any_of(serve->stderr_lines().begin(), serve->stderr_lines().end(),
                          registered_again)
              || serve->read_until(true, registered_again, limit).has_value());
  serve->send_signal(SIGTERM);
  serve->wait(limit);
}

BOOST_AUTO_TEST_CASE(unknown_keys_get_nothing_and_bad_frames_get_typed_errors) {
  service_dir s;
  auto serve = s.serve();
  // A key the service does not know: the handshake fails, no reply ever comes.
  {
    client intruder{s.keys("intruder")};
    v1::Envelope list;
    list.mutable_list_jobs();
    BOOST_CHECK(!intruder.call(list));
  }
  auto cli = s.admin({"jobs", "--key", s.dir / "keys/intruder", "--timeout-ms", "1000"});
  BOOST_CHECK_EQUAL(cli.exit_code, 1);
  // A worker key may not act as admin.
  {
    client worker{s.keys("worker-a")};
    v1::Envelope submit;
    submit.mutable_list_jobs();
    auto r = worker.call(submit);
    BOOST_REQUIRE(r);
    BOOST_CHECK_EQUAL(r->error().code(), v1::ERROR_NOT_REGISTERED);
    auto reg = worker.register_worker("admin", "sneaky", "");
    BOOST_REQUIRE(reg);
    BOOST_CHECK_EQUAL(reg->error().code(), v1::ERROR_FORBIDDEN);
  }
  // Raw frames on an admin connection: garbage, two frames, an unknown version.
  auto o = s.keys("admin");
  zmq::context_t ctx;
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  sock.set(zmq::sockopt::curve_serverkey, o.server_public_key);
  sock.set(zmq::sockopt::curve_publickey, o.public_key);
  sock.set(zmq::sockopt::curve_secretkey, o.secret_key);
  sock.set(zmq::sockopt::rcvtimeo, 5000);
  sock.connect(o.endpoint);
  auto answer = [&]() {
    zmq::message_t m;
    BOOST_REQUIRE(sock.recv(m));
    v1::Envelope e;
    BOOST_REQUIRE(e.ParseFromArray(m.data(), int(m.size())));
    return e;
  };
  sock.send(zmq::str_buffer("\x07garbage that is not protobuf"), zmq::send_flags::none);
  BOOST_CHECK_EQUAL(answer().error().code(), v1::ERROR_MALFORMED);
  sock.send(zmq::str_buffer("one"), zmq::send_flags::sndmore);
  sock.send(zmq::str_buffer("two"), zmq::send_flags::none);
  BOOST_CHECK_EQUAL(answer().error().code(), v1::ERROR_MALFORMED);
  v1::Envelope future;
  future.set_version(7);
  future.set_request_id(42);
  future.mutable_list_jobs();
  auto bytes = future.SerializeAsString();
  sock.send(zmq::buffer(bytes), zmq::send_flags::none);
  auto e = answer();
  BOOST_CHECK_EQUAL(e.request_id(), 42u);
  BOOST_CHECK_EQUAL(e.error().code(), v1::ERROR_UNSUPPORTED_VERSION);
  // The service is still there.
  auto jobs = s.admin({"jobs", "--json"});
  BOOST_CHECK_EQUAL(jobs.exit_code, 0);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(limit));
}

BOOST_AUTO_TEST_CASE(a_collective_shim_announces_an_intent_and_the_fabric_commits_it) {
  service_dir s;
  auto serve = s.serve();
  client shim{s.keys("shim")};
  auto reg = shim.register_worker("collective-shim", "shim-0", "");
  BOOST_REQUIRE(reg && reg->has_registered());
  v1::Envelope e;
  auto* i = e.mutable_fabric_intent();
  i->set_owner("job-x");
  i->set_stage("train");
  i->set_primitive("all-reduce");
  for (auto [server, gpu] : {std::pair{0u, 0u}, std::pair{1u, 4u}}) { // rail 0 and rail 1
    auto* r = i->add_members();
    r->set_server(server);
    r->set_gpu(gpu);
  }
  i->set_bytes(1e9);
  i->set_window("stage-boundary");
  i->set_window_s(1.0);
  auto d = shim.call(e);
  BOOST_REQUIRE(d && d->has_fabric_decision());
  BOOST_CHECK_EQUAL(d->fabric_decision().outcome(), "committed");
  BOOST_CHECK_EQUAL(d->fabric_decision().circuits(), 4u);
  auto plans = s.admin({"fabric", "--json"});
  BOOST_CHECK(plans.out.find("\"owner\": \"job-x\"") != std::string::npos);
  // A malformed intent is refused with the reason.
  i->set_stage("warp-drive");
  auto bad = shim.call(e);
  BOOST_REQUIRE(bad && bad->has_error());
  BOOST_CHECK_EQUAL(bad->error().code(), v1::ERROR_INVALID);
  serve->send_signal(SIGTERM);
  BOOST_CHECK(serve->wait(limit));
}
