#include "app/admin_views.hpp"
#include "app/commands.hpp"

#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "records/gen_proto.hpp"
#include "records/proto_enums.hpp"

namespace loom {

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
    for (size_t i = 0; i + 1 < cells.size(); ++i)
      out += fmt::format("{:<{}}  ", cells[i], width[i]);
    if (!cells.empty())
      out += cells.back(); // the last column unpadded: no line ends in blanks
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    std::printf("%s\n", out.c_str());
  };
  line(header);
  for (auto& r : rows)
    line(r);
}

/// Dollars to the cent: a cost summed in binary prints as 57.04, not 57.040000000000006.
double cents(double dollars) {
  return std::round(dollars * 100) / 100;
}

/// A job's state: the enum when the service sent it, else its text (a service from before).
std::string state_of(const v1::JobInfo& j) {
  auto state = read_either<job_state>(j.job_state(), j.state());
  return state ? std::string{to_string(*state)} : j.state();
}

template <class Repeated>
std::vector<std::string> strings(const Repeated& xs) {
  return {xs.begin(), xs.end()};
}

/// "done/of", or "done" for a job that runs until it is finished.
std::string iterations_of(const v1::JobInfo& j) {
  return j.iterations() ? fmt::format("{}/{}", j.iterations_done(), j.iterations())
                        : std::to_string(j.iterations_done());
}

std::string phase_name(v1::Phase p) {
  if (p == v1::PHASE_UNSPECIFIED)
    return "";
  auto name = v1::Phase_Name(p).substr(6); // PHASE_ROLLOUT -> ROLLOUT
  for (auto& c : name)
    c = char(std::tolower(c));
  return name;
}

json job_json(const v1::JobInfo& j, bool detail) {
  json out = {{"job", j.job()},       {"state", state_of(j)},       {"group", j.group()},
              {"slo", j.slo()},       {"solo_s", j.solo_s()},       {"reason", j.reason()},
              {"iterations", j.iterations()}, {"iterations_done", j.iterations_done()}};
  if (!detail)
    return out;
  out.update({{"rollout_nodes", strings(j.rollout_nodes())},
              {"training_nodes", strings(j.training_nodes())},
              {"workers", strings(j.workers())},
              {"phase", phase_name(j.phase())},
              {"running", j.running()},
              {"waiting", j.waiting()},
              {"overruns", j.overruns()}});
  return out;
}

/// `loom job ID`: where it runs, how far it got, who works for it, and why it waits.
void print_job(const v1::JobInfo& j) {
  auto line = [](const char* key, const std::string& value) {
    if (!value.empty())
      std::printf("%-11s %s\n", key, value.c_str());
  };
  line("job", j.job());
  line("state", state_of(j));
  line("group", j.group());
  line("iterations", iterations_of(j));
  line("slo", fmt::format("{:.2f} x solo {:.1f} s", j.slo(), j.solo_s()));
  line("rollout", fmt::format("{}", fmt::join(j.rollout_nodes(), ", ")));
  line("training", fmt::format("{}", fmt::join(j.training_nodes(), ", ")));
  line("workers", fmt::format("{}", fmt::join(j.workers(), ", ")));
  if (j.phase() != v1::PHASE_UNSPECIFIED)
    line("phase", fmt::format("{} ({})", phase_name(j.phase()), j.running() ? "running" : "waiting"));
  line("waiting", j.waiting());
  if (j.overruns())
    line("overruns", std::to_string(j.overruns()));
  line("reason", j.reason());
}

json show_jobs(const admin_request& req, const v1::Envelope& reply) {
  if (reply.has_job_info()) {
    if (!req.json)
      print_job(reply.job_info());
    return job_json(reply.job_info(), true);
  }
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& j : reply.job_list().jobs()) {
    out.push_back(job_json(j, false));
    rows.push_back({j.job(), state_of(j), j.group(), iterations_of(j),
                    fmt::format("{:.2f}", j.slo()), fmt::format("{:.1f}", j.solo_s()),
                    j.reason()});
  }
  if (!req.json)
    print_table({"JOB", "STATE", "GROUP", "ITERATIONS", "SLO", "SOLO_S", "REASON"}, rows);
  return out;
}

/// Groups with their jobs in round-robin turn order (WEAVE §4.3) and their own cost.
json show_groups(const admin_request& req, const v1::GroupList& groups) {
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& g : groups.groups()) {
    std::vector<std::string> turns;
    for (int i = 0; i < g.jobs_size(); ++i)
      turns.push_back(i < g.iterations_done_size()
                        ? fmt::format("{}({})", g.jobs(i), g.iterations_done(i))
                        : g.jobs(i));
    out.push_back({{"group", g.group()}, {"turn_order", strings(g.jobs())},
                   {"iterations_done", std::vector<uint64_t>(g.iterations_done().begin(),
                                                             g.iterations_done().end())},
                   {"rollout_nodes", strings(g.rollout_nodes())},
                   {"training_nodes", strings(g.training_nodes())},
                   {"saturated", g.saturated()}, {"cost_per_hour", cents(g.cost_per_hour())}});
    rows.push_back({g.group(), fmt::format("{}", fmt::join(turns, " > ")),
                    fmt::format("{}", fmt::join(g.rollout_nodes(), ",")),
                    fmt::format("{}", fmt::join(g.training_nodes(), ",")),
                    g.saturated() ? "yes" : "no", fmt::format("{:.2f}", g.cost_per_hour())});
  }
  if (!req.json)
    print_table({"GROUP", "TURN ORDER (ITERATIONS)", "ROLLOUT", "TRAINING", "SATURATED", "$/H"},
                rows);
  return out;
}

/// Opus jobs on their rails (Opus §7: each on its own ports of every rail); `below` another
/// table printed just before.
json show_opus(const admin_request& req, const v1::FabricPlans& plans, bool below) {
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& j : plans.opus()) {
    const auto last = j.first_port() + j.ranks() - 1;
    out.push_back({{"job", j.job()}, {"rails", strings(j.rails())}, {"topo_id", j.topo()},
                   {"first_port", j.first_port()}, {"ranks", j.ranks()},
                   {"fallback", j.fallback()}});
    rows.push_back({j.job(), fmt::format("{}", fmt::join(j.rails(), ",")), j.topo(),
                    fmt::format("{}-{}", j.first_port(), last),
                    j.fallback() ? "giant ring" : "topo_id"});
  }
  if (!req.json && !rows.empty()) {
    if (below)
      std::printf("\n");
    print_table({"OPUS JOB", "RAILS", "TOPO_ID", "PORTS", "CARRIES"}, rows);
  }
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
                    fmt::format("{}", fmt::join(p.devices(), ","))});
  }
  // An empty plans table is shown only where there is nothing else to show.
  const bool shown = !req.json && (!rows.empty() || plans.opus().empty());
  if (shown)
    print_table({"OWNER", "STAGE", "VERSION", "CIRCUITS", "DEVICES"}, rows);
  return {{"plans", out}, {"opus", show_opus(req, plans, shown)}};
}

json generation_json(const v1::GenerationInfo& d) {
  json instances = json::array();
  for (auto& i : d.instances())
    instances.push_back({{"instance", i.instance()},
                         {"config", loom::from_proto(i.config()).name()},
                         {"engines", strings(i.engines())}});
  return {{"deployment", d.deployment()},
          {"model", d.model()},
          {"gpus", d.gpus()},
          {"current", d.current()},
          {"layout", d.epoch()},
          {"engines", strings(d.engines())},
          {"instances", instances},
          {"step", d.step()},
          {"step_active", d.step_active()},
          {"pending", d.pending()},
          {"finished", d.finished()},
          {"reconfiguring", d.phase()},
          {"forecast_mean_tokens", d.forecast_mean_tokens()},
          {"recent", strings(d.recent())},
          {"reconfigurations", d.counters().reconfigurations()},
          {"migrations", d.counters().migrations()},
          {"kv_transfers", d.counters().kv_transfers()},
          {"kv_recomputes", d.counters().kv_recomputes()},
          {"engines_lost", d.counters().engines_lost()},
          {"commands_retried", d.counters().commands_retried()},
          {"commands_abandoned", d.counters().commands_abandoned()},
          {"last_solve_ms", d.last_solve_ms()},
          {"last_forecast_error", d.last_forecast_error()}};
}

/// Each deployment: what serves and on which engines, the step, the forecast, and its last
/// decisions.
json show_generation(const admin_request& req, const v1::GenerationList& list) {
  json out = json::array();
  std::vector<std::vector<std::string>> rows;
  for (auto& d : list.deployments()) {
    out.push_back(generation_json(d));
    auto step = d.step_active() ? fmt::format("{} ({} left)", d.step(), d.pending())
                                : fmt::format("{} done", d.step());
    // Once its engines left nothing serves, whatever layout it last had ("0xTP4" said so).
    const auto serving = d.instances().empty() ? std::string{"nothing"} : d.current();
    rows.push_back({d.deployment(), serving + (d.phase().empty() ? "" : " " + d.phase()),
                    std::to_string(d.engines_size()), step,
                    fmt::format("{:.0f}", d.forecast_mean_tokens()),
                    std::to_string(d.counters().reconfigurations()),
                    std::to_string(d.counters().migrations()),
                    fmt::format("{:.2f}", d.last_solve_ms()),
                    d.last_forecast_error() < 0 ? "-"
                                                : fmt::format("{:.3f}", d.last_forecast_error())});
  }
  if (req.json)
    return out;
  print_table({"DEPLOYMENT", "SERVING", "ENGINES", "STEP", "FORECAST TOKENS", "RECONF", "MIGR",
               "SOLVE MS", "FCST ERR"},
              rows);
  for (auto& d : list.deployments()) {
    std::printf("\n%s engines: %s\n", d.deployment().c_str(),
                d.engines().empty()
                  ? "none registered (engines register with role gen-instance)"
                  : fmt::format("{}", fmt::join(d.engines(), ", ")).c_str());
    for (auto& r : d.recent())
      std::printf("  %s\n", r.c_str());
  }
  return out;
}

json show_node(const admin_request& req, const v1::NodeOutcome& o) {
  json out = {{"node", req.argument},
              {"failed", !req.node_back},
              {"failed_jobs", json::array()},
              {"replanning", json::array()}};
  for (auto& j : o.failed_jobs())
    out["failed_jobs"].push_back(j);
  for (auto& owner : o.replanning())
    out["replanning"].push_back(owner);
  if (!req.json)
    std::printf("%s: %s; jobs failed: %s; fabric owners re-planning: %s\n", req.argument.c_str(),
                req.node_back ? "back in service" : "out of service",
                o.failed_jobs().empty() ? "none" : out["failed_jobs"].dump().c_str(),
                o.replanning().empty() ? "none" : out["replanning"].dump().c_str());
  return out;
}

/// A submission's answer with its group's own cost; a rejected job is exit_refused.
int show_submit(const admin_request& req, const v1::SubmitReply& r) {
  auto kind = read_either<placement_kind>(r.placement(), r.outcome());
  std::string outcome = kind ? std::string{to_string(*kind)} : r.outcome();
  json out = {{"job", r.job()},
              {"outcome", outcome},
              {"group", r.group()},
              {"reason", r.reason()},
              {"group_cost_per_hour", cents(r.group_cost_per_hour())},
              {"cost_per_hour", cents(r.cost_per_hour())}};
  if (req.json)
    std::printf("%s\n", out.dump(2).c_str());
  else if (r.group().empty())
    std::printf("%s: %s: %s\n", r.job().c_str(), outcome.c_str(), r.reason().c_str());
  else
    std::printf("%s: %s in group %s (group $%.2f/h, cluster $%.2f/h)\n", r.job().c_str(),
                outcome.c_str(), r.group().c_str(), r.group_cost_per_hour(), r.cost_per_hour());
  return kind == placement_kind::rejected ? exit_refused : 0;
}

} // namespace

int show(const admin_request& req, const v1::Envelope& reply) {
  json out;
  switch (reply.body_case()) {
    case v1::Envelope::kSubmitReply: return show_submit(req, reply.submit_reply());
    case v1::Envelope::kJobList:
    case v1::Envelope::kJobInfo: out = show_jobs(req, reply); break;
    case v1::Envelope::kGroupList: out = show_groups(req, reply.group_list()); break;
    case v1::Envelope::kFabricPlans: out = show_fabric(req, reply.fabric_plans()); break;
    case v1::Envelope::kNodeOutcome: out = show_node(req, reply.node_outcome()); break;
    case v1::Envelope::kGenerationList:
      out = show_generation(req, reply.generation_list());
      break;
    case v1::Envelope::kStepDone: {
      auto& d = reply.step_done();
      out = {{"deployment", d.deployment()}, {"step", d.step()}, {"aborted", d.aborted()},
             {"reason", d.reason()}};
      if (!req.json)
        std::printf("%s: step %llu aborted: %s\n", d.deployment().c_str(),
                    static_cast<unsigned long long>(d.step()), d.reason().c_str());
      break;
    }
    case v1::Envelope::kOk:
      out = {{"ok", true}};
      if (!req.json)
        std::printf("%s: done\n", req.argument.c_str());
      break;
    default:
      std::fprintf(stderr, "%s: unexpected reply\n", req.command.c_str());
      return exit_failure;
  }
  if (req.json)
    std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

} // namespace loom
