// Replay reports people read: the figures' data, report.html, `loom report`, `loom events`, and
// the scenario errors a researcher meets first.
#define BOOST_TEST_MODULE report
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "replay/html_report.hpp"
#include "replay/report_figures.hpp"
#include "replay/weave_figures.hpp"
#include "replay/weave_scenario.hpp"
#include "support/process.hpp"

using namespace loom;
using json = nlohmann::ordered_json;

namespace {

replay::activity_span span(std::string job, std::string group, replay::activity_kind kind,
                           double start, double end) {
  return {std::move(job), std::move(group), kind, start, end, 8};
}

/// The JSON the page is drawn from, as embedded in report.html.
json page_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"loom-data\">";
  auto from = html.find(open);
  BOOST_REQUIRE(from != std::string::npos);
  from += open.size();
  auto to = html.find("</script>", from);
  std::string text = html.substr(from, to - from);
  for (size_t at = text.find("<\\/"); at != std::string::npos; at = text.find("<\\/", at))
    text.replace(at, 3, "</");
  return json::parse(text);
}

json policy_entry(double cost, double slo) {
  return {{"cost_per_hour_avg", cost}, {"slo_attainment", slo}};
}

} // namespace

BOOST_AUTO_TEST_CASE(the_gantt_shows_the_busiest_group_from_its_second_member_on) {
  using replay::activity_kind;
  std::vector<replay::activity_span> acts{
    span("a", "g1", activity_kind::rollout, 0, 10),
    span("x", "g2", activity_kind::rollout, 1, 5),
    span("a", "g1", activity_kind::training, 10, 12),
    span("b", "g1", activity_kind::staging, 11, 20),
    span("a", "g1", activity_kind::sync, 12, 13),
    span("c", "g1", activity_kind::rollout, 20, -1), // still running at the end
    span("b", "g1", activity_kind::tail_migration, 21, 21),
  };
  auto g = replay::group_gantt(acts);
  BOOST_CHECK_EQUAL(g["group"], "g1");
  BOOST_CHECK_EQUAL(g["members"], 3);
  auto& rows = g["activities"];
  BOOST_REQUIRE_EQUAL(rows.size(), 4u); // a's activities before b joined are left out
  BOOST_CHECK_EQUAL(rows[0][0], "b");
  BOOST_CHECK_EQUAL(rows[0][1], "staging");
  BOOST_CHECK_EQUAL(rows[0][2].get<double>(), 0.0);
  BOOST_CHECK_EQUAL(rows[1][0], "a");
  BOOST_CHECK_EQUAL(rows[2][3].get<double>(), 9.0); // open: drawn as a point at its start
  BOOST_CHECK_EQUAL(rows[3][1], "tail_migration");
  BOOST_CHECK(replay::group_gantt({}).is_null());
  std::vector<replay::activity_span> many;
  for (int i = 0; i < 500; ++i)
    many.push_back(span(i % 2 ? "p" : "q", "g", activity_kind::rollout, i, i + 1));
  BOOST_CHECK_EQUAL(replay::group_gantt(many)["activities"].size(), replay::gantt_max_activities);
}

BOOST_AUTO_TEST_CASE(weave_series_holds_every_record_and_each_jobs_worst_steady_iteration) {
  std::vector<cluster_record> cluster{{3'600'000'000'000, cluster_event::new_group, "a", 10, 8, 8, 1},
                                      {7'200'000'000'000, cluster_event::left, "a", 0, 0, 0, 0}};
  std::vector<iteration_record> its{{"a", "g", 0, 0, 50, 10, 10, 1.5},  // cold start: left out
                                    {"a", "g", 1, 0, 14, 10, 10, 1.5},
                                    {"a", "g", 2, 0, 12, 10, 10, 1.5}};
  auto s = replay::weave_series(cluster, its, 0);
  BOOST_CHECK_EQUAL(s["timeline"]["t_h"].dump(), "[1.0,2.0]");
  BOOST_CHECK_EQUAL(s["timeline"]["cost_per_hour"].dump(), "[10.0,0.0]");
  BOOST_CHECK_EQUAL(s["jobs"]["id"].dump(), "[\"a\"]");
  BOOST_CHECK_EQUAL(s["jobs"]["worst_slowdown"][0].get<double>(), 1.4);
  BOOST_CHECK_EQUAL(s["jobs"]["slo"][0].get<double>(), 1.5);
}

BOOST_AUTO_TEST_CASE(the_verdict_puts_cost_and_slo_attainment_side_by_side) {
  // #40 item 5: a policy that misses one job's SLO is still listed by its cost, not dropped.
  json report{{"policies", {{"weave", policy_entry(300, 0.995)}, {"solo-d", policy_entry(450, 1.0)},
                            {"greedy", policy_entry(250, 0.6)},
                            {"optimal", policy_entry(200, 1.0)}}}};
  BOOST_CHECK_EQUAL(replay::verdict_of(report),
                    "cost, jobs within SLO: greedy $250.0/h (0.833x weave), 60.0%; weave $300.0/h, "
                    "99.5%; solo-d $450.0/h (1.500x weave), 100.0%; the offline optimum is "
                    "$200.0/h (weave at 1.500x it)");
  // With the dollars each finished iteration took (the same work, whatever span it took),
  // that is the cost compared: a policy cheaper per hour because it stretched its jobs is not.
  auto with_iterations = report;
  for (auto [name, per] : {std::pair{"weave", 1.2}, std::pair{"solo-d", 1.8},
                           std::pair{"greedy", 1.5}})
    with_iterations["policies"][name]["cost_per_iteration"] = per;
  BOOST_CHECK_EQUAL(replay::verdict_of(with_iterations),
                    "cost, jobs within SLO: weave $300.0/h, $1.200 per iteration, 99.5%; greedy "
                    "$250.0/h, $1.500 per iteration (1.250x weave), 60.0%; solo-d $450.0/h, "
                    "$1.800 per iteration (1.500x weave), 100.0%; the offline optimum is "
                    "$200.0/h (weave at 1.500x it)");
  json solo{{"policies", {{"solo-d", policy_entry(450, 1.0)}}}};
  BOOST_CHECK_EQUAL(replay::verdict_of(solo), "cost, jobs within SLO: solo-d $450.0/h, 100.0%");
  json gen{{"policies", {{"orchestr", {{"samples_per_s", 3.0}}}, {"static-best", json::object()}}},
           {"throughput_vs_static_best", {{"orchestr", 1.2}, {"static-best", 1.0}}}};
  BOOST_CHECK_EQUAL(replay::verdict_of(gen), "orchestr is fastest: 3.000 samples/s, 1.200x "
                                             "static-best");
  gen["paper"] = {{"orchestr_vs_static_best", 1.42}, {"source", "OrchestrRL Fig. 9"}};
  BOOST_CHECK_EQUAL(replay::verdict_of(gen), "orchestr is fastest: 3.000 samples/s, 1.200x "
                                             "static-best; the paper: orchestr 1.42x "
                                             "(OrchestrRL Fig. 9)");
  BOOST_CHECK_EQUAL(replay::verdict_of(json{{"kind", "fabric"}}), "");
}

BOOST_AUTO_TEST_CASE(the_page_inlines_chart_js_and_carries_the_reports_figures) {
  json report{{"scenario", "s</script>x"},
              {"policies", {{"weave", policy_entry(300, 1.0)}}}};
  report["policies"]["weave"]["figures"] = {
    {"timeline", {{"t_h", {0, 1}}, {"cost_per_hour", {5, 6}}, {"rollout_gpus", {1, 2}},
                  {"train_gpus", {3, 4}}}}};
  auto html = replay::render_html_report({{"run", report}});
  BOOST_CHECK(html.find(replay::chart_js_text()) != std::string::npos);
  BOOST_CHECK(html.find("/*LOOM_") == std::string::npos);
  BOOST_CHECK(html.find("s</script>x") == std::string::npos); // escaped inside the script
  auto data = page_data(html);
  BOOST_CHECK_EQUAL(data["runs"][0]["scenario"], "s</script>x");
  BOOST_CHECK_EQUAL(data["runs"][0]["figures"], replay::figures_of(report));
  BOOST_CHECK_EQUAL(data["runs"][0]["figures"][0]["series"][0]["data"].dump(), "[[0,5],[1,6]]");
  BOOST_CHECK(data["comparison"].is_null());
  json other = report;
  other["policies"]["weave"]["cost_per_hour_avg"] = 310;
  auto cmp = page_data(replay::render_html_report({{"a", report}, {"b", other}}))["comparison"];
  BOOST_REQUIRE_EQUAL(cmp["differ"].size(), 1u);
  BOOST_CHECK_EQUAL(cmp["differ"][0].dump(), "[\"policies.weave.cost_per_hour_avg\",300.0,310.0]");
  BOOST_CHECK(!cmp.contains("warning"));
  // #40 item 11: a WEAVE run beside a generation run is compared with a warning.
  json gen{{"policies", {{"orchestr", {{"samples_per_s", 3.0}}}}},
           {"throughput_vs_static_best", {{"orchestr", 1.2}}}};
  auto mixed = page_data(replay::render_html_report({{"a", report}, {"g", gen}}))["comparison"];
  BOOST_CHECK_EQUAL(mixed["warning"].get<std::string>(),
                    "these runs are of different kinds (weave, generation): their numbers "
                    "measure different things and do not compare");
}

BOOST_AUTO_TEST_CASE(a_replay_writes_report_html_that_loom_report_redraws_the_same) {
  test::temp_dir dir;
  const auto out = dir / "o";
  auto r = test::run({test::loom_binary(), "replay",
                      test::source_path("replay/scenarios/weave-drive.toml"), "--out", out});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_CHECK_MESSAGE(r.out.find("cost, jobs within SLO: weave $") != std::string::npos, r.out);
  auto html = test::read_file(out + "/report.html");
  auto report = json::parse(test::read_file(out + "/report.json"));
  BOOST_CHECK_EQUAL(page_data(html)["runs"][0]["figures"], replay::figures_of(report));
  std::filesystem::remove(out + "/report.html");
  auto again = test::run({test::loom_binary(), "report", out});
  BOOST_REQUIRE_EQUAL(again.exit_code, 0);
  BOOST_CHECK(test::read_file(out + "/report.html") == html);
  auto cmp = test::run({test::loom_binary(), "report", out, out + "/report.json", "--out",
                        dir / "c.html"});
  BOOST_CHECK_EQUAL(cmp.exit_code, 0);
  BOOST_CHECK_EQUAL(page_data(test::read_file(dir / "c.html"))["runs"].size(), 2u);
  auto missing = test::run({test::loom_binary(), "report", dir / "nothing"});
  BOOST_CHECK_EQUAL(missing.exit_code, 2);
  BOOST_CHECK(missing.err.find("cannot open") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(loom_events_prints_a_stores_log_as_json_lines) {
  test::temp_dir dir;
  const auto out = dir / "o";
  BOOST_REQUIRE_EQUAL(test::run({test::loom_binary(), "replay",
                                 test::source_path("replay/scenarios/weave-drive.toml"), "--out",
                                 out}).exit_code, 0);
  auto r = test::run({test::loom_binary(), "events", out + "/store/weave"});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  std::istringstream lines{r.out};
  std::string line;
  uint64_t seq = 0;
  size_t placed = 0;
  while (std::getline(lines, line)) {
    auto e = json::parse(line);
    BOOST_CHECK_EQUAL(e["seq"].get<uint64_t>(), ++seq); // every event, in log order
    placed += e["kind"] == "job_placed";
    // A replay's times are simulated seconds; the detail is an object, not logfmt text.
    BOOST_CHECK(e.contains("sim_s") && !e.contains("time"));
    BOOST_CHECK_MESSAGE(e["detail"].is_object(), line);
    if (e["kind"] == "job_placed")
      BOOST_CHECK_MESSAGE(e["detail"]["group"].is_string() && e["detail"]["cost_per_hour"].is_number(), line);
  }
  auto report = json::parse(test::read_file(out + "/report.json"));
  auto& d = report["policies"]["weave"]["decisions"];
  BOOST_CHECK_EQUAL(placed, d["direct_packing"].get<size_t>() + d["rollout_scaling"].get<size_t>()
                              + d["new_group"].get<size_t>());
  auto some = test::run({test::loom_binary(), "events", out + "/store/weave", "--from", "3",
                         "--limit", "2"});
  BOOST_CHECK_EQUAL(std::count(some.out.begin(), some.out.end(), '\n'), 2);
  BOOST_CHECK(some.out.rfind("{\"seq\":3,", 0) == 0);
  auto none = test::run({test::loom_binary(), "events", dir / "nothing"});
  BOOST_CHECK_EQUAL(none.exit_code, 2);
  BOOST_CHECK(none.err.find("not a Loom store") != std::string::npos);
  BOOST_CHECK(!std::filesystem::exists(dir / "nothing")); // reading creates nothing
}

BOOST_AUTO_TEST_CASE(scenario_inputs_resolve_against_the_file_and_errors_name_key_and_path) {
  test::temp_dir dir;
  auto text = test::read_file(test::source_path("replay/scenarios/weave-small-opt.toml"));
  // The bundled cluster, by a path relative to the scenario's own directory.
  const auto cluster = test::source_path("replay/clusters/weave-sim-cluster.toml");
  std::filesystem::create_directories(dir / "sub");
  std::filesystem::copy_file(cluster, dir / "sub/c.toml");
  auto with = [&](const std::string& from, const std::string& to) {
    auto t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  const auto ok = with("../clusters/weave-sim-cluster.toml", "sub/c.toml");
  test::write_file(dir / "ok.toml", ok);
  BOOST_CHECK(replay::load_weave_scenario(dir / "ok.toml").value);
  test::write_file(dir / "bad.toml", with("../clusters/weave-sim-cluster.toml", "nope.toml"));
  auto bad = replay::load_weave_scenario(dir / "bad.toml");
  BOOST_REQUIRE(!bad.errors.empty());
  auto e = bad.errors.front().to_string();
  BOOST_CHECK_MESSAGE(e.find("cluster") != std::string::npos
                        && e.find((dir.path() / "nope.toml").string()) != std::string::npos, e);
  auto policies_at = ok.find("policies = ");
  auto line_end = ok.find('\n', policies_at);
  test::write_file(dir / "none.toml",
                   ok.substr(0, policies_at) + "policies = []" + ok.substr(line_end));
  auto none = replay::load_weave_scenario(dir / "none.toml");
  BOOST_REQUIRE(!none.errors.empty());
  BOOST_CHECK_MESSAGE(none.errors.front().to_string().find("lists no policy") != std::string::npos,
                      none.errors.front().to_string());
}

BOOST_AUTO_TEST_CASE(every_file_in_the_scenarios_folder_is_a_scenario) {
  for (auto& entry : std::filesystem::directory_iterator(test::source_path("replay/scenarios"))) {
    auto text = test::read_file(entry.path().string());
    BOOST_CHECK_MESSAGE(text.find("[scenario]") != std::string::npos, entry.path().string());
  }
}
