#include "app/admin.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "gateway/keys.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"
#include "scheduler/job_spec.hpp"
#include "store/proto_enums.hpp"

namespace loom {

std::string keys_dir(const config& cfg) {
  return cfg.security.keys_dir.empty()
           ? (std::filesystem::path{cfg.storage.path} / "keys").string()
           : cfg.security.keys_dir;
}

int run_keygen(const std::string& name, const std::string& dir) {
  auto k = generate_keypair();
  if (!k) {
    std::fprintf(stderr, "keygen: %s\n", render(k.error()).c_str());
    return 1;
  }
  if (auto err = write_keypair(dir, name, *k)) {
    std::fprintf(stderr, "keygen: %s\n", render(err).c_str());
    return 1;
  }
  auto base = (std::filesystem::path{dir} / name).string();
  std::printf("wrote %s.pub and %s.secret\npublic key: %s\n", base.c_str(), base.c_str(),
              k->public_key.c_str());
  return 0;
}

namespace {

using json = nlohmann::json;

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i)
    width[i] = header[i].size();
  for (auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i)
      out += fmt::format("{:<{}}{}", cells[i], width[i], i + 1 < cells.size() ? "  " : "");
    std::printf("%s\n", out.c_str());
  };
  line(header);
  for (auto& r : rows)
    line(r);
}

/// A job's state: the enum when the service sent it, else its text (a service from before).
std::string state_of(const v1::JobInfo& j) {
  auto state = read_either<job_state>(j.job_state(), j.state());
  return state ? std::string{to_string(*state)} : j.state();
}

json job_json(const v1::JobInfo& j) {
  return {{"job", j.job()}, {"state", state_of(j)}, {"group", j.group()},
          {"slo", j.slo()}, {"solo_s", j.solo_s()}, {"reason", j.reason()}};
}

std::vector<std::string> job_row(const v1::JobInfo& j) {
  return {j.job(), state_of(j), j.group(), fmt::format("{:.2f}", j.slo()),
          fmt::format("{:.1f}", j.solo_s()), j.reason()};
}

std::string join(const google::protobuf::RepeatedPtrField<std::string>& xs) {
  std::string out;
  for (auto& x : xs)
    out += (out.empty() ? "" : ",") + x;
  return out;
}

std::vector<std::string> strings(const google::protobuf::RepeatedPtrField<std::string>& xs) {
  return {xs.begin(), xs.end()};
}

/// The keys to reach the service with: its server key and the admin pair (or --key's).
std::optional<client_options> client_options_for(const config& cfg, const admin_request& req) {
  client_options opt;
  opt.endpoint = cfg.endpoints.gateway;
  opt.timeout = std::chrono::milliseconds{req.timeout_ms};
  if (cfg.security.insecure)
    return opt;
  auto dir = keys_dir(cfg);
  auto prefix = req.key.empty() ? (std::filesystem::path{dir} / "admin").string() : req.key;
  opt.server_public_key = read_key((std::filesystem::path{dir} / "server.pub").string());
  opt.public_key = read_key(prefix + ".pub");
  opt.secret_key = read_key(prefix + ".secret");
  if (opt.server_public_key.empty() || opt.public_key.empty() || opt.secret_key.empty()) {
    std::fprintf(stderr, "%s: no server key (%s/server.pub) or admin key pair (%s.pub, "
                         "%s.secret); has `loom serve` started with this config?\n",
                 req.command.c_str(), dir.c_str(), prefix.c_str(), prefix.c_str());
    return std::nullopt;
  }
  return opt;
}

/// The request a command sends; nothing (after printing why) for a job file with errors.
std::optional<v1::Envelope> request_for(const config& cfg, const admin_request& req) {
  v1::Envelope request;
  if (req.command == "submit") {
    auto spec = load_job_spec_file(req.argument, cfg.policy.weave.default_slo);
    if (!spec.value) {
      for (auto& e : spec.errors)
        std::fprintf(stderr, "%s\n", e.to_string().c_str());
      return std::nullopt;
    }
    std::ifstream in(req.argument);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    request.mutable_submit_job()->set_spec_toml(text);
    request.mutable_submit_job()->set_source(req.argument);
  } else if (req.command == "jobs") {
    request.mutable_list_jobs();
  } else if (req.command == "job") {
    request.mutable_inspect_job()->set_job(req.argument);
  } else if (req.command == "cancel") {
    request.mutable_cancel_job()->set_job(req.argument);
  } else if (req.command == "groups") {
    request.mutable_list_groups();
  } else {
    request.mutable_list_fabric();
  }
  return request;
}

/// A submission's answer; a rejected job is exit code 1.
int show_submit(const admin_request& req, const v1::SubmitReply& r) {
  auto kind = read_either<placement_kind>(r.placement(), r.outcome());
  std::string outcome = kind ? std::string{to_string(*kind)} : r.outcome();
  json out = {{"job", r.job()}, {"outcome", outcome}, {"group", r.group()},
              {"reason", r.reason()}, {"cost_per_hour", r.cost_per_hour()}};
  if (req.json)
    std::printf("%s\n", out.dump(2).c_str());
  else
    std::printf("%s: %s%s%s ($%.2f/h)\n", r.job().c_str(), outcome.c_str(),
                r.group().empty() ? "" : (" in group " + r.group()).c_str(),
                r.reason().empty() ? "" : (": " + r.reason()).c_str(), r.cost_per_hour());
  return kind == placement_kind::rejected ? 1 : 0;
}

json show_jobs(const admin_request& req, const v1::Envelope& reply) {
  std::vector<const v1::JobInfo*> jobs;
  if (reply.has_job_info())
    jobs.push_back(&reply.job_info());
  for (auto& j : reply.job_list().jobs())
    jobs.push_back(&j);
  json out = reply.has_job_info() ? job_json(reply.job_info()) : json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto* j : jobs) {
    if (!reply.has_job_info())
      out.push_back(job_json(*j));
    rows.push_back(job_row(*j));
  }
  if (!req.json)
    print_table({"JOB", "STATE", "GROUP", "SLO", "SOLO_S", "REASON"}, rows);
  return out;
}

json show_groups(const admin_request& req, const v1::GroupList& groups) {
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& g : groups.groups()) {
    out.push_back({{"group", g.group()}, {"jobs", strings(g.jobs())},
                   {"rollout_nodes", strings(g.rollout_nodes())},
                   {"training_nodes", strings(g.training_nodes())},
                   {"saturated", g.saturated()}, {"cost_per_hour", g.cost_per_hour()}});
    rows.push_back({g.group(), join(g.jobs()), join(g.rollout_nodes()), join(g.training_nodes()),
                    g.saturated() ? "yes" : "no", fmt::format("{:.2f}", g.cost_per_hour())});
  }
  if (!req.json)
    print_table({"GROUP", "JOBS", "ROLLOUT", "TRAINING", "SATURATED", "$/H"}, rows);
  return out;
}

json show_fabric(const admin_request& req, const v1::FabricPlans& plans) {
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& p : plans.plans()) {
    auto stage = read_either<fabric_stage>(p.stage_kind(), p.stage());
    std::string name = stage ? std::string{to_string(*stage)} : p.stage();
    out.push_back({{"owner", p.owner()}, {"stage", name}, {"version", p.version()},
                   {"circuits", p.circuits()}, {"devices", strings(p.devices())}});
    rows.push_back({p.owner(), name, std::to_string(p.version()), std::to_string(p.circuits()),
                    join(p.devices())});
  }
  if (!req.json)
    print_table({"OWNER", "STAGE", "VERSION", "CIRCUITS", "DEVICES"}, rows);
  return out;
}

/// The reply, as a table or JSON; the exit code.
int show(const admin_request& req, const v1::Envelope& reply) {
  json out;
  switch (reply.body_case()) {
    case v1::Envelope::kSubmitReply: return show_submit(req, reply.submit_reply());
    case v1::Envelope::kJobList:
    case v1::Envelope::kJobInfo: out = show_jobs(req, reply); break;
    case v1::Envelope::kGroupList: out = show_groups(req, reply.group_list()); break;
    case v1::Envelope::kFabricPlans: out = show_fabric(req, reply.fabric_plans()); break;
    case v1::Envelope::kOk:
      out = {{"ok", true}};
      if (!req.json)
        std::printf("%s: done\n", req.argument.c_str());
      break;
    default:
      std::fprintf(stderr, "%s: unexpected reply\n", req.command.c_str());
      return 1;
  }
  if (req.json)
    std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

} // namespace

int run_admin(const config& cfg, const admin_request& req) {
  auto opt = client_options_for(cfg, req);
  if (!opt)
    return 1;
  auto request = request_for(cfg, req);
  if (!request)
    return 2;
  client c{*opt};
  auto reply = c.call(*request);
  if (!reply) {
    std::fprintf(stderr, "%s: no answer from %s within %d ms\n", req.command.c_str(),
                 opt->endpoint.c_str(), req.timeout_ms);
    return 1;
  }
  if (reply->has_error()) {
    std::fprintf(stderr, "%s: %s: %s\n", req.command.c_str(),
                 v1::ErrorCode_Name(reply->error().code()).c_str(),
                 reply->error().message().c_str());
    return 1;
  }
  return show(req, *reply);
}

} // namespace loom
