#pragma once
// One generation instance under continuous batching, as vLLM runs it, advanced incrementally:
// waiting requests are admitted in order while KV blocks are free (and under max_batch), every
// running request gains one token per decode step, finished requests free their KV, and when
// growing sequences overflow the KV cache the newest running request is preempted and later
// recomputed. Event-driven: the steps between two events (a finish, a KV overflow) are summed in
// closed form, so the cost grows with the number of requests, not with the tokens they generate.
// Pure: its clock is its own, in seconds.

#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <vector>

#include "generation/engine_model.hpp"

namespace loom {

struct sim_request {
  int64_t context = 0;      // tokens already in the sequence (prompt + generated so far)
  int64_t remaining = 0;    // tokens still to generate
  bool kv_resident = false; // its KV is already on this instance (no prefill needed)
};

/// A request as it stands inside an instance.
struct request_progress {
  uint64_t id = 0;
  sim_request state;
  bool running = false;
};

class instance_sim {
public:
  /// `terms`, if given, is the config's decode_terms_table, shared with other simulations.
  instance_sim(const engine_model& engine, const parallel_config& config,
               decode_terms_table* terms = nullptr);

  /// Queues a request behind the waiting ones.
  void add(uint64_t id, const sim_request& request);
  /// Room for `requests` more without reallocating.
  void reserve(size_t requests) { slots_.reserve(slots_.size() + requests); }

  /// Removes a request wherever it is; its progress so far is in the returned state.
  std::optional<sim_request> take(uint64_t id);

  /// Runs decode steps while the clock is before `t` (a step that starts before `t` completes)
  /// and there is work.
  void advance_to(double t);

  /// Runs until every request has finished (or the head of the queue can never fit).
  void run_to_completion();

  double now() const { return clock_; }
  /// Idles until `t` if it has nothing to do (an instance's clock never runs backwards).
  void wait_until(double t);

  bool idle() const { return batch_ == 0 && waiting_.empty(); }
  bool feasible() const { return feasible_; }
  int running() const { return batch_; }
  size_t waiting() const { return waiting_.size(); }
  int64_t kv_capacity_tokens() const { return capacity_; }
  int64_t kv_free_tokens() const { return capacity_ - used(); }
  int max_batch() const { return max_batch_; }
  /// Tokens per second over the last advance_to, summed over the batch.
  double decode_rate_tps() const { return rate_; }
  /// Decode steps per second over the last advance_to: how fast one running request
  /// progresses (0 if it did not run).
  double step_rate() const { return step_rate_; }
  int64_t steps() const { return step_; }
  int64_t preemptions() const { return preemptions_; }
  int peak_batch() const { return peak_batch_; }
  const parallel_config& config() const { return config_; }

  /// Every request still here, waiting or running.
  std::vector<request_progress> requests() const;
  /// Calls `f(request_progress)` for every request still here, without a list to hold them.
  template <typename F>
  void for_each_request(F&& f) const {
    for (auto& r : slots_) {
      if (!r.present)
        continue;
      if (!r.active) {
        f(request_progress{r.id, r.req, false});
        continue;
      }
      const auto generated = step_ - r.admitted;
      f(request_progress{
        r.id, {r.req.context + generated, r.req.remaining - generated, true}, true});
    }
  }
  /// (id, finish time) of every request finished so far, in finishing order.
  const std::vector<std::pair<uint64_t, double>>& finished() const { return finished_; }

private:
  struct slot {
    uint64_t id = 0;
    sim_request req;       // at admission (running) or now (waiting)
    int64_t admitted = 0;  // step of admission
    int64_t finish = 0;    // step at which it is done
    uint32_t epoch = 0;    // bumped when it leaves the batch, to ignore stale heap entries
    bool active = false;   // running
    bool present = true;   // not finished or taken
  };

  int64_t used() const { return s_ + int64_t(batch_) * step_; }
  void admit();
  void retire_finished();
  void preempt_overflow();
  void leave_batch(slot& r);

  const engine_model* engine_;
  decode_terms_table* terms_;
  parallel_config config_;
  int64_t capacity_;
  int max_batch_;
  std::vector<slot> slots_;
  std::deque<size_t> waiting_;
  std::deque<size_t> admission_order_; // running, oldest first (lazy: may hold departed)
  struct entry {
    int64_t finish = 0; // step
    uint32_t slot = 0;
    uint32_t epoch = 0;
    /// Earliest finish on top, ties to the lower slot; entries alike but for their epoch
    /// are one request's, and only the live one is acted on.
    bool operator>(const entry& o) const {
      return finish != o.finish ? finish > o.finish : slot > o.slot;
    }
  };
  std::priority_queue<entry, std::vector<entry>, std::greater<>> finishing_;
  std::vector<std::pair<uint64_t, double>> finished_;
  int64_t step_ = 0;
  int batch_ = 0;
  int64_t s_ = 0; // running context = s_ + batch_ * step_, s_ = sum(context0 - admitted)
  double clock_ = 0;
  double rate_ = 0;
  double step_rate_ = 0;
  int64_t preemptions_ = 0;
  int peak_batch_ = 0;
  bool feasible_ = true;
};

} // namespace loom
