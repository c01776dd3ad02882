#pragma once
// The thresholds the papers name, in one place, so operators tune them in config.

namespace loom {

struct weave_policy {
  double tail_migration_threshold = 0.8; // WEAVE §4.3: fraction of responses done
  int max_group_size = 4;                // jobs per co-execution group
  double default_slo = 1.5;              // tolerated slowdown vs. solo when a job names none
};

struct planner_policy {
  double period_s = 30;        // OrchestrRL §4.1: planning period inside a Gen step
  double epsilon_s = 2;        // Alg. 1 event 1: required gain Obj_cur - Obj_new - cost
  int histogram_bin_tokens = 256; // §4.1 remaining-workload histogram bin width
};

struct balancer_policy {
  double theta = 0.25;   // OrchestrRL §4.2: max-min LoadIndex gap that triggers migration
  double tick_ms = 500;  // monitoring interval
};

struct fabric_policy {
  double safe_window_margin_ms = 5; // RFabric §5.3: slack required beyond the OCS delay
};

struct policy {
  weave_policy weave;
  planner_policy planner;
  balancer_policy balancer;
  fabric_policy fabric;
};

} // namespace loom
