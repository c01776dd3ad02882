#include "generation/instance_sim.hpp"

#include <algorithm>
#include <limits>

namespace loom {

instance_sim::instance_sim(const engine_model& engine, const parallel_config& config,
                           decode_terms_table* terms)
  : engine_(&engine), terms_(terms), config_(config),
    capacity_(engine.kv_capacity_tokens(config)), max_batch_(engine.max_batch(config)) {}

void instance_sim::add(uint64_t id, const sim_request& request) {
  if (request.remaining <= 0)
    return;
  slots_.push_back(slot{id, request, 0, 0, 0, false, true});
  waiting_.push_back(slots_.size() - 1);
}

void instance_sim::leave_batch(slot& r) {
  r.active = false;
  ++r.epoch;
  s_ -= r.req.context - r.admitted;
  --batch_;
}

std::optional<sim_request> instance_sim::take(uint64_t id) {
  // Migrations are rare next to admissions and finishes: a scan beats keeping an index.
  auto it = std::find_if(slots_.begin(), slots_.end(),
                         [&](const slot& r) { return r.present && r.id == id; });
  if (it == slots_.end())
    return std::nullopt;
  auto& r = *it;
  const auto i = size_t(it - slots_.begin());
  sim_request out = r.req;
  if (r.active) {
    auto generated = step_ - r.admitted;
    out = {r.req.context + generated, r.req.remaining - generated, true};
    leave_batch(r);
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), i));
  }
  r.present = false;
  return out;
}

void instance_sim::admit() {
  double prefill_tokens = 0;
  while (!waiting_.empty() && batch_ < max_batch()) {
    auto i = waiting_.front();
    auto& r = slots_[i];
    if (used() + r.req.context + 1 > capacity_)
      break;
    waiting_.pop_front();
    if (!r.req.kv_resident)
      prefill_tokens += double(r.req.context);
    r.req.kv_resident = true;
    r.admitted = step_;
    r.finish = step_ + r.req.remaining;
    r.active = true;
    s_ += r.req.context - r.admitted;
    ++batch_;
    admission_order_.push_back(i);
    finishing_.push({r.finish, uint32_t(i), r.epoch});
  }
  clock_ += engine_->prefill_s(config_, prefill_tokens); // one chunked-prefill pass
  if (batch_ == 0 && !waiting_.empty())
    feasible_ = false; // the head of the queue cannot fit even alone
  peak_batch_ = std::max(peak_batch_, batch_);
}

void instance_sim::retire_finished() {
  while (!finishing_.empty() && finishing_.top().finish <= step_) {
    const auto [finish, i, epoch] = finishing_.top();
    finishing_.pop();
    auto& r = slots_[i];
    if (!r.active || r.epoch != epoch)
      continue;
    leave_batch(r);
    r.present = false;
    finished_.emplace_back(r.id, clock_);
  }
}

void instance_sim::preempt_overflow() {
  // Sequences grew: preempt the newest until the KV cache fits again (vLLM's recompute mode).
  while (used() > capacity_ && batch_ > 1) {
    auto i = admission_order_.back();
    admission_order_.pop_back();
    auto& r = slots_[i];
    if (!r.active)
      continue;
    auto generated = step_ - r.admitted;
    leave_batch(r);
    r.req = {r.req.context + generated, r.req.remaining - generated, false};
    waiting_.push_front(i);
    ++preemptions_;
  }
  while (!admission_order_.empty() && !slots_[admission_order_.front()].active)
    admission_order_.pop_front();
}

void instance_sim::advance_to(double t) {
  const double start_clock = clock_;
  const int64_t start_step = step_;
  int64_t generated = 0;
  while (clock_ < t && feasible_) {
    admit();
    if (batch_ == 0)
      break;
    while (true) { // drop stale heap entries
      const auto [finish, i, epoch] = finishing_.top();
      if (slots_[i].active && slots_[i].epoch == epoch)
        break;
      finishing_.pop();
    }
    int64_t until_finish = finishing_.top().finish - step_;
    // A lone sequence beyond the cache has no one to preempt: it runs to its end.
    int64_t until_overflow = used() > capacity_ ? until_finish : (capacity_ - used()) / batch_ + 1;
    int64_t steps = std::max<int64_t>(1, std::min(until_finish, until_overflow));
    const auto terms = terms_ ? terms_->at(batch_) : engine_->decode_terms(config_, batch_);
    auto cost = [&](int64_t k) {
      return engine_model::decode_steps_s(terms, batch_, double(used()), k);
    };
    double spent = cost(steps);
    if (clock_ + spent > t && steps > 1) {
      // Stop at the first step that ends at or after t: the sum is increasing in k.
      int64_t lo = 1;
      int64_t hi = steps;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (clock_ + cost(mid) >= t)
          hi = mid;
        else
          lo = mid + 1;
      }
      steps = lo;
      spent = cost(steps);
    }
    clock_ += spent;
    step_ += steps;
    generated += int64_t(batch_) * steps;
    retire_finished();
    preempt_overflow();
  }
  rate_ = clock_ > start_clock ? double(generated) / (clock_ - start_clock) : 0.0;
  step_rate_ = clock_ > start_clock ? double(step_ - start_step) / (clock_ - start_clock) : 0.0;
}

void instance_sim::run_to_completion() {
  advance_to(std::numeric_limits<double>::infinity());
}

void instance_sim::wait_until(double t) {
  if (idle() && clock_ < t)
    clock_ = t;
}

std::vector<request_progress> instance_sim::requests() const {
  std::vector<request_progress> out;
  for_each_request([&](const request_progress& r) { out.push_back(r); });
  return out;
}

} // namespace loom
