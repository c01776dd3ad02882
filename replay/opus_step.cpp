#include "replay/opus_step.hpp"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <random>
#include <set>

#include <fmt/format.h>

#include "fabric/rail_orchestrator.hpp"
#include "loom/opus_shim.hpp"

namespace loom::replay {

namespace {

/// A dense decoder's parameters from its shape: grouped-query attention (q and o at d x d, k
/// and v at d x kv_heads * d / heads), a gated MLP (three d x d_ff matrices), untied input and
/// output embeddings.
opus_model dense(std::string name, int layers, int hidden, double ffn, int heads, int kv_heads,
                 double vocab) {
  const double d = hidden, kv = d * kv_heads / heads;
  const double per_layer = 2 * d * d + 2 * d * kv + 3 * d * ffn;
  const double params = layers * per_layer + 2 * vocab * d;
  return {std::move(name), params, params, layers, hidden};
}

/// Opus Table 2's Llama-3-8B (8.03B) and §3 Exp. 3's Llama-3-70B (70.6B), from Meta's
/// published shapes; §5.3 Table 3's ~80B LLaMA and GPT share one row of dimensions (82.7B with
/// those). DeepSeek-v3-16B is TorchTitan's small DeepSeek-V3 configuration: 15.7B parameters,
/// 2.4B active per token.
const std::vector<opus_model>& catalogue() {
  static const std::vector<opus_model> models{
    dense("Llama-3-8B", 32, 4096, 14336, 32, 8, 128256),
    dense("Llama-3-70B", 80, 8192, 28672, 64, 8, 128256),
    dense("LLaMA-80B", 96, 8192, 28672, 64, 8, 32000),
    dense("GPT-80B", 96, 8192, 28672, 64, 8, 32000),
    {"DeepSeek-v3-16B", 15.7e9, 2.4e9, 27, 2048},
  };
  return models;
}

} // namespace

const opus_model* find_opus_model(const std::string& name) {
  for (auto& m : catalogue())
    if (m.name == name)
      return &m;
  return nullptr;
}

std::string opus_model_names() {
  std::string out;
  for (auto& m : catalogue())
    out += (out.empty() ? "" : ", ") + m.name;
  return out;
}

namespace {

struct item {
  bool comm = false;
  double seconds = 0; // compute
  int dim = 0;        // comm: 0 = PP, 1 = DP (FSDP)
  double bytes = 0;
  int op = -1;        // PP: rendezvous id shared by sender and receiver
  int peer = -1;
  int step = 0;
  uint64_t index = 0; // operation index within its communication group
};

/// One microbatch's compute and what a stage moves, from the model and the parallelism.
struct stage_costs {
  double fwd = 0; // seconds
  double bwd = 0;
  double shard = 0;      // bytes: bf16 parameters of a stage, per TP rank (all-gather)
  double gradients = 0;  // bytes: fp32 gradients of a stage, per TP rank (reduce-scatter)
  double activation = 0; // bytes per microbatch boundary
};

stage_costs costs_of(const opus_workload& w, const opus_env& env) {
  const int m = w.pp; // Opus Table 2: as many microbatches as stages
  const double tokens = double(w.global_batch) / w.fsdp / m * w.seq_len;
  const double flops_per_s = env.gpu_tflops * 1e12 * env.mfu;
  const auto& md = w.model;
  // Dense matmuls over the stage's share of active parameters plus causal attention scores.
  double fwd_flops = 2 * md.active_params * tokens
                     + 2.0 * md.layers * double(w.seq_len) * md.hidden * tokens;
  stage_costs c;
  c.fwd = fwd_flops / (w.tp * w.pp) / flops_per_s;
  c.bwd = 2 * c.fwd;
  c.shard = 2 * md.params / (w.tp * w.pp);
  // TorchTitan reduces gradients in fp32 (mixed_precision_reduce): the reduce-scatter moves
  // twice the all-gather's bytes (Opus Fig. 4(b): 957 MB all-gathered, 3,829 MB measured after
  // the reduce-scatter's window; the other 2x is not explained by the paper).
  c.gradients = 4 * md.params / (w.tp * w.pp);
  c.activation = tokens * md.hidden * 2 / w.tp;
  return c;
}

class schedule_builder {
public:
  schedule_builder(const opus_workload& w, stage_costs c) : w_(w), c_(c), out_(size_t(w.pp)) {}

  std::vector<std::vector<item>> build(int steps) {
    for (int step = 0; step < steps; ++step)
      for (int s = 0; s < w_.pp; ++s)
        stage_step(step, s);
    // Operation indices per communication group: a stage's FSDP group, or a PP stage pair.
    std::map<std::pair<int, int>, uint64_t> counter;
    for (int s = 0; s < w_.pp; ++s)
      for (auto& it : out_[size_t(s)])
        if (it.comm)
          it.index = it.dim == 0 ? uint64_t(it.op) : counter[{s, -1}]++;
    return std::move(out_);
  }

private:
  /// A PP Send/Recv's rendezvous id, shared by sender and receiver.
  int pp_op(int step, int kind, int mb, int lower) {
    auto [it, fresh] = op_id_.try_emplace({step, kind * w_.pp + mb, lower}, next_op_);
    if (fresh)
      ++next_op_;
    return it->second;
  }

  void comm(int step, int s, int dim, double bytes, int op, int peer) {
    item it;
    it.comm = true;
    it.dim = dim;
    it.bytes = bytes;
    it.op = op;
    it.peer = peer;
    it.step = step;
    out_[size_t(s)].push_back(it);
  }

  void compute(int step, int s, double seconds) {
    item it;
    it.seconds = seconds;
    it.step = step;
    out_[size_t(s)].push_back(it);
  }

  /// One step of stage s, as TorchTitan runs it under Megatron's non-interleaved 1F1B with its
  /// batched Send/Recv pairs (Opus §3, §5.2): the FSDP all-gather (a downstream stage's only
  /// once the first activation arrived: PyTorch's lazy DTensor all-gather), warm-up forwards,
  /// one forward then one backward in the steady state, cool-down backwards, then the FSDP
  /// reduce-scatter and the optimizer step's short all-reduce. A batched pair (send this
  /// activation, receive that gradient) is one rendezvous of the two stages: both sides list
  /// the same pairs in the same order, so it cannot deadlock.
  void stage_step(int step, int s) {
    const int pp = w_.pp, m = w_.pp; // as many microbatches as stages (Opus Table 2)
    const int warm = std::min(pp - s - 1, m), steady = m - warm;
    const bool first = s == 0, last = s + 1 == pp;
    auto act = [&](int mb, int lower) { return pp_op(step, 0, mb, lower); };
    auto grad = [&](int mb, int lower) { return pp_op(step, 1, mb, lower); };
    auto up = [&](int op) { comm(step, s, 0, c_.activation, op, s - 1); };
    auto down = [&](int op) { comm(step, s, 0, c_.activation, op, s + 1); };
    bool gathered = false;
    auto gather = [&] {
      if (!gathered && w_.fsdp > 1)
        comm(step, s, 1, c_.shard, -1, -1);
      gathered = true;
    };
    if (first)
      gather();
    for (int i = 0; i < warm; ++i) {
      if (!first) {
        up(act(i, s - 1));
        gather();
      }
      compute(step, s, c_.fwd);
      if (!last)
        down(act(i, s));
    }
    if (!first) {
      up(act(warm, s - 1));
      gather();
    }
    for (int i = 0; i < steady; ++i) {
      compute(step, s, c_.fwd);
      if (!last)
        down(act(warm + i, s)); // with the gradient of microbatch i
      compute(step, s, c_.bwd);
      if (!first)
        up(i + 1 < steady ? act(warm + i + 1, s - 1) // with the gradient of microbatch i
                          : grad(i, s - 1));
    }
    for (int i = steady; i < m; ++i) {
      if (!last)
        down(grad(i, s));
      compute(step, s, c_.bwd);
      if (!first)
        up(grad(i, s - 1));
    }
    if (w_.fsdp > 1) {
      comm(step, s, 1, c_.gradients, -1, -1);      // reduce-scatter of the gradients
      comm(step, s, 1, optimizer_bytes, -1, -1);    // the optimizer's gradient-norm all-reduce
    }
  }

  // Opus Fig. 4: the optimizer step's synchronisation all-reduces move under 1 MB.
  static constexpr double optimizer_bytes = 4096;

  const opus_workload& w_;
  stage_costs c_;
  std::vector<std::vector<item>> out_;
  int next_op_ = 0;
  std::map<std::tuple<int, int, int>, int> op_id_; // (step, kind*m + mb, boundary) -> id
};

/// Steps of TorchTitan FSDP + PP per stage (reshard-after-forward off under PP, its default),
/// in 1F1B order (schedule_builder::stage_step).
std::vector<std::vector<item>> build_schedule(const opus_workload& w, const opus_env& env,
                                              int steps) {
  return schedule_builder{w, costs_of(w, env)}.build(steps);
}

class simulation {
public:
  simulation(const opus_workload& w, const opus_env& env, opus_mode mode, int steps,
             uint64_t seed)
      : w_(w), env_(env), mode_(mode), steps_(steps), rng_(seed),
        items_(build_schedule(w, env, steps)) {
    bw_ = env.link_gbps * 1e9 / 8;
    auto c = costs_of(w, env);
    run_.all_gather_bytes = ring_share() * c.shard;
    run_.reduce_scatter_bytes = ring_share() * c.gradients;
    stage_.assign(size_t(w.pp), stage_state{opus_shim_policy{mode == opus_mode::on_demand
                                                                ? opus_shim_mode::on_demand
                                                                : opus_shim_mode::provisioning}});
    // Profiling (Opus §4.2): one step's trace per stage gives the phase table.
    for (int s = 0; s < w.pp; ++s) {
      std::vector<traced_op> trace;
      for (auto& it : items_[size_t(s)])
        if (it.comm && it.step == 0)
          trace.push_back({it.dim, it.bytes});
      auto phases = learn_phases(trace);
      // Cyclic: a step's last phase runs into the next step's first.
      int boundaries = int(phases.size());
      if (phases.size() > 1 && phases.front().dim == phases.back().dim)
        --boundaries;
      run_.phase_boundaries.push_back(phases.size() > 1 ? boundaries : 0);
      std::vector<uint32_t> digits;
      for (auto& op : trace)
        digits.push_back(uint32_t(op.dim));
      stage_[size_t(s)].shim.set_table(std::move(digits));
    }
    // The rail starts in the topology its stages' first operations need.
    topo_id initial = topo_id::uniform(w.pp, 0);
    for (int s = 0; s < w.pp; ++s)
      for (auto& it : items_[size_t(s)])
        if (it.comm) {
          initial.set(s, uint8_t(it.dim));
          break;
        }
    orch_.emplace(opus_layout{w.pp, {w.fsdp}}, initial, env.max_retries);
    if (env.compute_jitter > 0) {
      std::uniform_real_distribution<double> j{1 - env.compute_jitter, 1 + env.compute_jitter};
      for (auto& v : items_)
        for (auto& it : v)
          if (!it.comm)
            it.seconds *= j(rng_);
    }
  }

  opus_run run() {
    for (int s = 0; s < w_.pp; ++s)
      at(0, [this, s] { advance(s); });
    while (!events_.empty()) {
      auto [t, seq] = events_.top().first;
      (void)seq;
      auto fn = std::move(actions_.at(events_.top().second));
      actions_.erase(events_.top().second);
      events_.pop();
      now_ = t;
      fn();
    }
    // Step k ends when every stage has finished its items of step k.
    std::vector<double> finish(size_t(steps_), 0);
    for (auto& st : stage_)
      for (size_t k = 0; k < st.step_end.size(); ++k)
        finish[k] = std::max(finish[k], st.step_end[k]);
    run_.step_s = steps_ > 1 ? finish.back() - finish[finish.size() - 2] : finish.back();
    return run_;
  }

private:
  struct stage_state {
    explicit stage_state(opus_shim_policy p) : shim(std::move(p)) {}
    opus_shim_policy shim; // Alg. 1-2 on the stage's phase table, as live shims run it
    size_t pc = 0;
    bool busy = false;   // computing or communicating
    bool locked = false; // a topo_write awaits its ACK
    std::set<size_t> written; // items a write was issued for
    std::vector<double> step_end;
  };
  void at(double t, std::function<void()> fn) {
    uint64_t id = next_++;
    actions_.emplace(id, std::move(fn));
    events_.push({{t, id}, id});
  }

  size_t op_in_step(int s, size_t pc) const {
    size_t k = 0;
    for (size_t i = 0; i < pc; ++i)
      if (items_[size_t(s)][i].comm && items_[size_t(s)][i].step == items_[size_t(s)][pc].step)
        ++k;
    return k;
  }

  /// What a rank sends of a collective's bytes in a ring over its fsdp-rank group.
  double ring_share() const { return (w_.fsdp - 1.0) / w_.fsdp; }

  bool reprogramming(int s) const { return reprogramming_.count(s) > 0; }

  /// G1: the rail's confirmed topology serves the operation and no stage it uses is being
  /// reprogrammed.
  bool served(int s, const item& it) const {
    if (reprogramming(s) || (it.peer >= 0 && reprogramming(it.peer)))
      return false;
    if (orch_->fallen_back())
      return true;
    auto& cur = orch_->current();
    if (it.dim != 0)
      return cur.digit(s) == it.dim;
    return cur.digit(s) == 0 && cur.digit(it.peer) == 0
           && (pp_peer(cur, s) == it.peer || pp_peer(cur, it.peer) == s);
  }

  /// The shim's topo_write (Opus Alg. 1-2) for an item, through the rail orchestration the
  /// controller runs live; the stage waits for its ACK.
  void write_for(int s, size_t pc) {
    auto& it = items_[size_t(s)][pc];
    auto& st = stage_[size_t(s)];
    st.written.insert(pc);
    st.locked = true;
    if (it.step == steps_ - 1)
      ++run_.topo_writes;
    std::string group = it.dim == 0 ? fmt::format("pp{}-{}", std::min(s, it.peer),
                                                  std::max(s, it.peer))
                                    : fmt::format("dp{}", s);
    auto out = orch_->write({group, it.index, it.dim == 0 ? 2 : 1, s, uint8_t(it.dim)},
                            uint64_t(s));
    if (out.transition) {
      step_of_[{group, it.index}] = it.step;
      if ((orch_->fallen_back() || out.transition->reprogram.empty()) && it.step == steps_ - 1)
        ++run_.suppressed;
    }
    for (auto& a : out.acks)
      ack(a.writers);
    start_reprogram();
  }

  /// Ranks in a barrier the controller acknowledges: a PP write's two stages, or a stage's
  /// whole FSDP group on this rail (one writer here stands for its fsdp ranks).
  int ranks_in(const std::vector<uint64_t>& stages) const {
    return stages.size() == 1 ? w_.fsdp : int(stages.size());
  }

  /// The ACK reaches the writers one round trip after the last of the barrier's ranks wrote;
  /// every further rank costs the controller one more write to process.
  void ack(const std::vector<uint64_t>& stages) {
    double control = env_.control_s + (ranks_in(stages) - 1) * env_.control_per_rank_s;
    at(now_ + control, [this, stages] {
      for (auto s : stages)
        stage_[size_t(s)].locked = false;
      advance_all();
    });
  }

  /// The orchestrator's next transition, once G2 allows it: no operation in flight on a
  /// stage it reprograms.
  void start_reprogram() {
    auto* t = orch_->start([this](int s) { return in_flight_[s] > 0; });
    if (!t)
      return;
    applying_ = *t;
    for (int s : t->reprogram)
      reprogramming_.insert(s);
    bool fails = env_.failing_applies > applies_failed_;
    double until = now_ + (fails ? env_.ack_timeout_s : env_.ocs_latency_s);
    for (int s : t->reprogram)
      run_.reprograms.push_back({s, now_, until});
    at(until, [this, fails] { finish_reprogram(fails); });
  }

  void finish_reprogram(bool failed) {
    reprogramming_.clear();
    if (failed)
      ++applies_failed_;
    auto r = orch_->finish(!failed);
    if (r.retry) {
      start_reprogram();
      return;
    }
    if (r.fell_back) {
      // Persistent failure: a static giant ring serves every operation from now on.
      run_.fell_back = true;
      bw_ *= env_.fallback_bandwidth;
    } else if (step_of_[{applying_.group, applying_.op_index}] == steps_ - 1) {
      ++run_.reconfigs;
      run_.submappings += int(applying_.reprogram.size());
    }
    for (auto& a : r.acks)
      ack(a.writers);
    start_reprogram();
    advance_all();
  }

  void advance_all() {
    for (int s = 0; s < w_.pp; ++s)
      advance(s);
  }

  void finish_item(int s) {
    auto& st = stage_[size_t(s)];
    auto& v = items_[size_t(s)];
    if (st.pc + 1 == v.size() || v[st.pc + 1].step != v[st.pc].step)
      st.step_end.push_back(now_);
    ++st.pc;
    st.busy = false;
  }

  void advance(int s) {
    auto& st = stage_[size_t(s)];
    if (st.busy || st.pc >= items_[size_t(s)].size())
      return;
    auto& it = items_[size_t(s)][st.pc];
    if (!it.comm) {
      st.busy = true;
      at(now_ + it.seconds, [this, s] {
        finish_item(s);
        advance(s);
      });
      return;
    }
    if (mode_ != opus_mode::native) {
      // pre_comm (Opus Alg. 1): wait while the topology is locked by an unacknowledged write.
      if (st.locked)
        return;
      size_t k = op_in_step(s, st.pc);
      // The live shims' decision (opus_shim_policy); one provisioning wrote for already only
      // waits until the topology serves it.
      bool written = st.written.count(st.pc) > 0;
      if (!written && st.shim.write_before(k, served(s, it))) {
        write_for(s, st.pc);
        return;
      }
      if (!served(s, it))
        return;
    }
    if (it.dim == 0) {
      // PP Send/Recv: both ends must be there; the later one starts it.
      auto found = arrived_.find(it.op);
      if (found == arrived_.end()) {
        arrived_.emplace(it.op, s);
        return;
      }
      if (found->second == s || (mode_ != opus_mode::native && !served(s, it)))
        return;
      int other = found->second;
      arrived_.erase(found);
      start_comm({s, other}, it.bytes / bw_);
      return;
    }
    start_comm({s}, ring_share() * it.bytes / bw_);
  }

  void start_comm(std::vector<int> stages, double seconds) {
    for (int s : stages) {
      stage_[size_t(s)].busy = true;
      ++in_flight_[s];
    }
    double start = now_;
    at(now_ + seconds, [this, stages, start] {
      for (int s : stages) {
        --in_flight_[s];
        run_.comms.push_back({s, start, now_});
        post_comm(s);
      }
      start_reprogram();
      advance_all();
    });
  }

  /// Opus Alg. 2: with provisioning, after a phase's last operation (or any PP operation)
  /// write for the next operation now, so the OCS turns while the stage computes.
  void post_comm(int s) {
    auto& st = stage_[size_t(s)];
    size_t k = op_in_step(s, st.pc);
    finish_item(s);
    if (mode_ == opus_mode::native || !st.shim.write_after(k))
      return;
    for (size_t n = st.pc; n < items_[size_t(s)].size(); ++n)
      if (items_[size_t(s)][n].comm) {
        if (!st.written.count(n))
          write_for(s, n);
        break;
      }
  }

  const opus_workload& w_;
  opus_env env_;
  opus_mode mode_;
  int steps_;
  std::mt19937_64 rng_;
  std::vector<std::vector<item>> items_;
  std::optional<rail_orchestrator> orch_;
  topo_transition applying_;                                // the one the rails are applying
  std::map<std::pair<std::string, uint64_t>, int> step_of_; // a transition's step
  double bw_ = 0;
  double now_ = 0;
  uint64_t next_ = 0;
  std::priority_queue<std::pair<std::pair<double, uint64_t>, uint64_t>,
                      std::vector<std::pair<std::pair<double, uint64_t>, uint64_t>>,
                      std::greater<>>
    events_;
  std::map<uint64_t, std::function<void()>> actions_;
  std::vector<stage_state> stage_;
  std::map<int, int> in_flight_;
  std::map<int, int> arrived_; // PP op -> the stage waiting at it
  std::set<int> reprogramming_;
  int applies_failed_ = 0;
  opus_run run_;
};

} // namespace

opus_run simulate_opus(const opus_workload& w, const opus_env& env, opus_mode mode, int steps,
                       uint64_t seed) {
  return simulation(w, env, mode, steps, seed).run();
}

} // namespace loom::replay
