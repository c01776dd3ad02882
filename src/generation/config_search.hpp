#pragma once
// The proactive planner's search (OrchestrRL §4.1, Eq. 1-4, Alg. 1 event 1), pure: for each
// candidate parallel config, assign the pending requests to its instances, estimate every
// instance's remaining makespan with the batch simulator, add the switching cost C_sw and the
// KV migration cost C_mig, and reconfigure only if Obj_new < Obj_cur - epsilon and switching
// later (the current deployment kept while the batch is large, then a latency mode) does not
// win by more than epsilon. Assignments keep every instance's KV within Eq. 2's band, and the
// chosen one balances each request's expected remaining length.
//
// A new batch (a step's start, or the next one foreseen between steps) scores each start with
// its best later switch to a latency config, since Alg. 1 re-plans during the step: a tail
// config is kept into the next batch only if it beats a throughput start that switches later.
// Beyond the paper, what the forecast's comparisons err by (plan_error, measured once each
// step's true lengths are known) guards every decision: a switch must beat staying by that
// share of Obj_cur, or by epsilon, whichever is more.
//
// Candidates are deployments over the GPU budget, restricted as §4.1 says: intra-node TP
// first, cross-node TP only in whole nodes, EP (MoE) in whole nodes, AFD only with the few
// attention:FFN splits offline profiling kept; and adapted to the phase of the step (a large
// batch drops cross-node TP and admits AFD, the tail drops TP=1 and EP). Outside a large
// batch, mixed ones too: intra-node TP instances plus one or two latency instances that take
// the longest requests. A lower bound on each candidate's makespan skips the simulation of
// hopeless ones.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "generation/engine_model.hpp"
#include "generation/kv_migration.hpp"
#include "types/generation.hpp"

namespace loom {

struct gen_request_state {
  uint64_t id = 0;
  int64_t context = 0;   // tokens in the sequence now (its KV footprint)
  int64_t remaining = 0; // conservative estimate, from the remaining-workload histogram
  int instance = -1;     // current instance, -1 if not placed yet
  int64_t expected = 0;  // mean remaining given its progress, what placement balances; 0: the
                         // length is known, `remaining` is its expectation too
  int64_t generated = 0; // output tokens so far
  int64_t load() const { return expected > 0 ? expected : remaining; }
  /// The output length it is expected to reach: equal for requests the forecast cannot tell
  /// apart (their progress in one bin of the histogram).
  int64_t expected_length() const { return generated + load(); }
};

struct planner_params {
  double epsilon_s = 2.0;          // required gain beyond the reconfiguration cost
  double kv_balance_delta = 0.15;  // Eq. 2: each instance's KV utilisation within mu +- delta
  int gpus_per_node = 8;
  double weight_load_gbps = 25;    // C_sw: each GPU loads its new shard (PCIe from host), GB/s
  double engine_restart_s = 3.0;   // C_sw: tearing down and warming up the instances
  double standby_restart_s = 1.35; // C_sw to a standby config, one the engines keep pre-mapped
                                   // (§4.1, GPU virtual memory): §6.2.2 measures 1.5 s for
                                   // TP2 -> TP8 on Qwen-14B, 0.15 s of it the TP8 shard
  std::vector<parallel_config> standby; // configs every engine keeps pre-mapped: those it ran
                                        // (the runtime reports them with each snapshot)
  kv_transfer_path kv_path;        // C_mig
  double large_batch_per_gpu = 16; // at or above: throughput phase; below 1: tail phase
  bool look_ahead = true;          // a switch must also beat switching later (§4.1)
  double length_resolution = 0.3;  // expected lengths closer than this (relative) are not told
                                   // apart: the forecast's histogram error, 0.30-0.32 measured
                                   // on every bundled generation scenario
  std::vector<parallel_config> afd_configs; // the profiled AFD splits (profile_afd_configs)
  double error_margin = 0;         // the planner's measured relative error (plan_error): a
                                   // switch must gain more than this share of Obj_cur
};

/// Offline AFD profiling (§4.1): every attention:FFN split of one or two nodes, each run on
/// a reference throughput batch (`batch` requests of `prompt` + `output` tokens per
/// instance); keeps the `keep` with the highest tokens per second per GPU.
std::vector<parallel_config> profile_afd_configs(const engine_model& engine, int gpus_per_node,
                                                 int batch = 256, int64_t prompt = 512,
                                                 int64_t output = 2048, size_t keep = 2);

/// The homogeneous configs the planner may choose for a full batch on `budget` GPUs (TP within
/// a node, EP for an MoE model, `p.afd_configs`), each scored as the others are: what a static
/// baseline fair to the planner sweeps. Mixed deployments are the planner's outside big
/// batches, with requests dealt by their forecast lengths; a static one has no such dealer.
std::vector<parallel_config> throughput_configs(const engine_model& engine, int budget,
                                                const planner_params& p);

struct candidate_score {
  gen_deployment config;
  double objective_s = 0; // Eq. 1 objective, infinity if infeasible; the bound if pruned
  bool pruned = false;    // its lower bound already lost to a simulated candidate
};

struct gen_plan {
  gen_deployment config;          // chosen (the current one unless reconfigure)
  std::vector<int> assignment;    // instance per request, in input order
  double objective_s = 0;         // of the chosen config, costs included
  double current_s = 0;           // Obj_cur: the current deployment and placement
  double deferred_s = std::numeric_limits<double>::infinity(); // a later switch that beat it
  double switch_s = 0;            // C_sw of the chosen config
  double migrate_s = 0;           // max over instances of C_mig
  bool reconfigure = false;
  std::vector<candidate_score> evaluated;
  gen_deployment alternative;     // what the choice was preferred to: the current deployment
                                  // for a switch, else the best other candidate scored
  double alternative_s = std::numeric_limits<double>::infinity(); // its objective
};

/// No placement of `requests` on `d` finishes sooner: the longest request decoding alone, or
/// the busiest instance's share of the tokens at an instance's best possible rate.
double makespan_lower_bound(const engine_model& engine, const gen_deployment& d,
                            const std::vector<gen_request_state>& requests);

/// No placement of `requests` on `instances` instances of `config` finishes sooner: a step of
/// batch b reading C context tokens costs, for any line of its terms, at least the least that
/// line charges a generated token (over every batch size) times b plus its slope times C; each
/// request reads its context plus t at its t-th token, and the instances share the steps at best
/// evenly. Tighter than makespan_lower_bound where steps read long contexts.
double work_lower_bound(const engine_model& engine, const parallel_config& config, int instances,
                        const std::vector<gen_request_state>& requests);

/// A batch nothing has run yet: every request unplaced with nothing generated (a step's start,
/// or the next step foreseen between steps).
bool new_batch(const std::vector<gen_request_state>& requests);

/// Eq. 1's objective of running `requests` on `d` from `current` (C_sw and C_mig included when
/// `d` is not `current`; a new batch's with its best later tail switch), scored as
/// plan_generation scores that candidate.
double objective_of(const engine_model& engine, int gpu_budget, const gen_deployment& d,
                    const gen_deployment& current,
                    const std::vector<gen_request_state>& requests, const planner_params& params);

gen_plan plan_generation(const engine_model& engine, int gpu_budget,
                         const gen_deployment& current,
                         const std::vector<gen_request_state>& requests,
                         const planner_params& params = {});

} // namespace loom
