#include "app/admin.hpp"
#include "app/admin_views.hpp"
#include "app/commands.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "gateway/keys.hpp"
#include "loom.pb.h"
#include "loom/client.hpp"
#include "protocol/error.hpp"
#include "scheduler/job_spec.hpp"

namespace loom {

std::string keys_dir(const config& cfg) {
  return cfg.security.keys_dir.empty()
           ? (std::filesystem::path{cfg.storage.path} / "keys").string()
           : cfg.security.keys_dir;
}

int run_keygen(const std::string& name, const std::string& dir, bool force) {
  auto base = (std::filesystem::path{dir} / name).string();
  for (auto file : {base + ".pub", base + ".secret"})
    if (!force && std::filesystem::exists(file)) {
      std::fprintf(stderr, "keygen: %s exists; clients configured with it would be locked out. "
                           "Pass --force to replace it.\n",
                   file.c_str());
      return 1;
    }
  auto k = generate_keypair();
  if (!k) {
    std::fprintf(stderr, "keygen: %s\n", render(k.error()).c_str());
    return 1;
  }
  if (auto err = write_keypair(dir, name, *k)) {
    std::fprintf(stderr, "keygen: %s\n", render(err).c_str());
    return 1;
  }
  std::printf("wrote %s.pub and %s.secret\npublic key: %s\n", base.c_str(), base.c_str(),
              k->public_key.c_str());
  return 0;
}

namespace {

/// The keys to reach the service with: its server key and the admin pair (or --key's).
std::optional<client_options> client_options_for(const config& cfg, const admin_request& req) {
  client_options opt;
  opt.endpoint = req.endpoints.empty() ? cfg.endpoints.gateway : req.endpoints;
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
  } else if (req.command == "node") {
    auto* r = request.mutable_node_report();
    r->set_node(req.argument);
    r->set_failed(!req.node_back);
    r->set_reason(req.reason);
  } else if (req.command == "groups") {
    request.mutable_list_groups();
  } else if (req.command == "generation" && !req.layout.empty()) {
    auto* s = request.mutable_set_layout();
    s->set_deployment(req.argument);
    s->set_layout(req.layout);
  } else if (req.command == "generation" && !req.argument.empty()) {
    auto* a = request.mutable_abort_step();
    a->set_deployment(req.argument);
    a->set_reason(req.reason);
  } else if (req.command == "generation") {
    request.mutable_list_generation();
  } else if (req.command == "fabric" && !req.argument.empty()) {
    request.mutable_opus_job_end()->set_job(req.argument);
  } else {
    request.mutable_list_fabric();
  }
  return request;
}

/// The reply, with every page of a job list after the first gathered into it; stops at the
/// first page that does not come back as one.
std::optional<v1::Envelope> call_all(client& c, v1::Envelope request) {
  auto reply = c.call(request);
  while (reply && reply->has_job_list() && !reply->job_list().next_after().empty()) {
    request.mutable_list_jobs()->set_after(reply->job_list().next_after());
    auto page = c.call(request);
    if (!page || !page->has_job_list())
      return page;
    auto* list = reply->mutable_job_list();
    for (auto& j : *page->mutable_job_list()->mutable_jobs())
      *list->add_jobs() = std::move(j);
    list->set_next_after(page->job_list().next_after());
  }
  return reply;
}

} // namespace

int run_admin(const config& cfg, const admin_request& req) {
  auto opt = client_options_for(cfg, req);
  if (!opt)
    return exit_failure;
  auto request = request_for(cfg, req);
  if (!request)
    return exit_config_error;
  client c{*opt};
  auto reply = call_all(c, *request);
  if (!reply) {
    auto why = c.link_diagnosis();
    std::fprintf(stderr, "%s: no answer from %s within %d ms%s%s\n", req.command.c_str(),
                 opt->endpoint.c_str(), req.timeout_ms, why.empty() ? "" : ": ", why.c_str());
    return exit_failure;
  }
  if (reply->has_error()) {
    std::fprintf(stderr, "%s: %s: %s\n", req.command.c_str(),
                 v1::ErrorCode_Name(reply->error().code()).c_str(),
                 reply->error().message().c_str());
    return exit_refused;
  }
  return show(req, *reply);
}

} // namespace loom
