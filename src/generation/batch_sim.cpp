#include "generation/batch_sim.hpp"

#include <algorithm>
#include <deque>
#include <queue>
#include <tuple>

namespace loom {

namespace {

struct running {
  int64_t context0 = 0;  // context at admission
  int64_t admitted = 0;  // step of admission
  int64_t finish = 0;    // step after which it is done
  uint32_t epoch = 0;    // bumped on preemption, to ignore stale heap entries
  bool active = false;
};

} // namespace

instance_result simulate_instance(const engine_model& engine, int tp,
                                  const std::vector<sim_request>& requests) {
  instance_result out;
  const int64_t capacity = engine.kv_capacity_tokens(tp);
  const int max_batch = engine.params().max_batch;
  std::vector<sim_request> reqs = requests;
  std::vector<running> state(reqs.size());
  std::deque<size_t> waiting;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (reqs[i].remaining > 0)
      waiting.push_back(i);
  std::deque<size_t> admission_order; // running requests, oldest first (lazy: may hold done ones)
  using entry = std::tuple<int64_t, size_t, uint32_t>; // finish step, request, epoch
  std::priority_queue<entry, std::vector<entry>, std::greater<>> finishing;
  int64_t step = 0;
  int batch = 0;
  // Total context of running requests is S + batch * step, with S = sum(context0 - admitted).
  int64_t s = 0;
  auto used = [&] { return s + static_cast<int64_t>(batch) * step; };

  while (!waiting.empty() || batch > 0) {
    double prefill_tokens = 0;
    while (!waiting.empty() && batch < max_batch) {
      auto i = waiting.front();
      if (used() + reqs[i].context + 1 > capacity)
        break;
      waiting.pop_front();
      auto& r = state[i];
      r = running{reqs[i].context, step, step + reqs[i].remaining, r.epoch, true};
      if (!reqs[i].kv_resident)
        prefill_tokens += static_cast<double>(reqs[i].context);
      s += r.context0 - r.admitted;
      ++batch;
      admission_order.push_back(i);
      finishing.emplace(r.finish, i, r.epoch);
    }
    if (batch == 0) {
      out.feasible = false; // the head of the queue cannot fit even alone
      break;
    }
    out.peak_batch = std::max(out.peak_batch, batch);
    out.makespan_s += engine.prefill_s(tp, prefill_tokens);
    // Nothing changes until the next request finishes or the growing sequences overflow the
    // KV cache (no admission is possible before either): run those steps in one go.
    while (!state[std::get<1>(finishing.top())].active
           || state[std::get<1>(finishing.top())].epoch != std::get<2>(finishing.top()))
      finishing.pop();
    int64_t until_finish = std::get<0>(finishing.top()) - step;
    // A lone sequence beyond the cache has no one to preempt: it runs to its end.
    int64_t until_overflow = used() > capacity ? until_finish : (capacity - used()) / batch + 1;
    int64_t steps = std::max<int64_t>(1, std::min(until_finish, until_overflow));
    out.makespan_s += engine.decode_steps_s(tp, batch, static_cast<double>(used()), steps);
    step += steps;
    while (!finishing.empty() && std::get<0>(finishing.top()) <= step) {
      auto [finish, i, epoch] = finishing.top();
      finishing.pop();
      auto& r = state[i];
      if (!r.active || r.epoch != epoch)
        continue;
      r.active = false;
      s -= r.context0 - r.admitted;
      --batch;
    }
    // Sequences grew by one token each: preempt the newest until the KV cache fits again.
    while (used() > capacity && batch > 1) {
      auto i = admission_order.back();
      admission_order.pop_back();
      auto& r = state[i];
      if (!r.active)
        continue;
      auto generated = step - r.admitted;
      r.active = false;
      ++r.epoch;
      s -= r.context0 - r.admitted;
      --batch;
      reqs[i].context = r.context0 + generated;
      reqs[i].remaining -= generated;
      reqs[i].kv_resident = false; // recompute on readmission
      waiting.push_front(i);
      ++out.preemptions;
    }
    while (!admission_order.empty() && !state[admission_order.front()].active)
      admission_order.pop_front();
  }
  out.steps = step;
  return out;
}

instance_result simulate_deployment(const engine_model& engine, int tp, int dp,
                                    const std::vector<sim_request>& requests) {
  std::vector<std::vector<sim_request>> shards(static_cast<size_t>(dp));
  for (size_t i = 0; i < requests.size(); ++i)
    shards[i % shards.size()].push_back(requests[i]);
  instance_result worst;
  for (auto& shard : shards) {
    auto r = simulate_instance(engine, tp, shard);
    worst.feasible = worst.feasible && r.feasible;
    worst.preemptions += r.preemptions;
    worst.peak_batch = std::max(worst.peak_batch, r.peak_batch);
    if (r.makespan_s > worst.makespan_s) {
      worst.makespan_s = r.makespan_s;
      worst.steps = r.steps;
    }
  }
  return worst;
}

} // namespace loom
