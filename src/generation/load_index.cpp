#include "generation/load_index.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace loom {

double kv_limited_concurrency(const gen_worker& w) {
  const auto& pool = w.running.empty() ? w.waiting : w.running;
  double mean_ctx = pool.empty() ? 1.0
                                 : std::accumulate(pool.begin(), pool.end(), 0.0,
                                                   [](double s, const gen_request& r) {
                                                     return s + double(r.context_tokens);
                                                   })
                                     / double(pool.size());
  double more = std::max<double>(0.0, double(w.kv_free_tokens)) / std::max(1.0, mean_ctx);
  return std::clamp(double(w.running.size()) + more, 1.0, double(std::max(1, w.max_batch)));
}

double load_index(const gen_worker& w, double mean_rate) {
  auto queued = double(w.running.size() + w.waiting.size());
  if (queued == 0)
    return 0;
  double relative_rate = mean_rate > 0 && w.decode_rate_tps > 0 ? w.decode_rate_tps / mean_rate
                                                                : 1.0;
  return queued / kv_limited_concurrency(w) / relative_rate;
}

void pace_estimate::observe(double rate_tps) {
  if (rate_tps <= 0)
    return;
  peak_ = std::max(peak_, rate_tps);
  if (!seen_) { // not §2.2's R/2: a straggler slow from its first report must be relieved
    mean_ = rate_tps;
    seen_ = true;
    return;
  }
  spread_ = 0.75 * spread_ + 0.25 * std::abs(mean_ - rate_tps); // §2.3, beta 1/4, alpha 1/8
  mean_ = 0.875 * mean_ + 0.125 * rate_tps;
}

namespace {

/// A pace the worker can be trusted to keep: its rate less (`sign` -1) or more (+1) the
/// spread it has shown.
double bound(double rate, double spread, int sign) {
  return rate > 0 ? std::max(0.0, rate + sign * spread) : 0.0;
}

/// Whether moving running request `r` onto `dst` pays (OrchestrRL App. A): the time it saves,
/// its expected remaining tokens (as many as it generated: lengths are heavy-tailed) at the
/// destination's pace instead of the source's, at least the waiting its KV move costs, the
/// destination's running batch included when the move is a recompute (kv_move_cost). The
/// paces are the workers' smoothed rates less what their spread leaves uncertain (the
/// source's fastest, the destination's slowest): a gap the rates' own noise explains moves
/// nothing.
bool move_pays(const gen_request& r, const gen_worker& src, const gen_worker& dst,
               double dst_rate, double dst_spread) {
  const double from = bound(src.pace_tps, src.rate_spread_tps, +1);
  const double to = bound(dst_rate, dst_spread, -1);
  if (from <= 0 || to < from)
    return false;
  const double saved = double(std::max<int64_t>(r.generated, 1)) * (1 / from - 1 / to);
  return saved >= r.move.best_s(int(dst.running.size()));
}

/// Index into `queue` of the shortest-context request the destination can take, or -1.
/// `running`: the queue is the running batch, whose requests move only if the move pays;
/// `dst_rate` is the pace the destination offers, `dst_spread` how far that pace has swung.
long pick(const std::vector<gen_request>& queue, bool running, const gen_worker& src,
          const gen_worker& dst, double dst_rate, double dst_spread, const balancer_params& p) {
  long best = -1;
  auto reserve = int64_t(dst.running.size()) * p.growth_reserve_tokens;
  for (size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].pinned || dst.kv_free_tokens - queue[i].context_tokens < reserve)
      continue;
    if (running && !move_pays(queue[i], src, dst, dst_rate, dst_spread))
      continue;
    if (best < 0 || queue[i].context_tokens < queue[size_t(best)].context_tokens)
      best = long(i);
  }
  return best;
}

} // namespace

std::vector<migration> plan_migrations(std::vector<gen_worker>& workers,
                                       const balancer_params& p) {
  std::vector<migration> out;
  if (workers.size() < 2)
    return out;
  double mean_rate = 0;
  double fastest = 0; // the fastest rate seen now, less its swing
  for (auto& w : workers) {
    mean_rate += w.decode_rate_tps / double(workers.size());
    fastest = std::max(fastest, bound(w.decode_rate_tps, w.rate_spread_tps, -1));
  }
  std::vector<double> index(workers.size());
  for (size_t i = 0; i < workers.size(); ++i)
    index[i] = load_index(workers[i], mean_rate);
  while (out.size() < p.max_migrations) {
    auto [lo, hi] = std::minmax_element(index.begin(), index.end());
    if (*hi - *lo <= p.theta)
      break;
    auto& src = workers[size_t(hi - index.begin())];
    auto& dst = workers[size_t(lo - index.begin())];
    // Waiting requests first (no KV to move), shortest context first.
    bool from_waiting = true;
    // An idle worker offers a request the pace it ran its last, fewest requests at (its peak:
    // its smoothed pace lags the rise as its batch drained), or the fastest seen now.
    const bool idle = dst.running.empty();
    const double dst_rate = idle ? std::max(fastest, dst.peak_tps) : dst.pace_tps;
    const double dst_spread = idle ? 0.0 : dst.rate_spread_tps;
    long i = pick(src.waiting, false, src, dst, dst_rate, dst_spread, p);
    if (i < 0) {
      from_waiting = false;
      i = pick(src.running, true, src, dst, dst_rate, dst_spread, p);
    }
    if (i < 0)
      break; // nothing the least congested worker can take without hurting its batch
    auto& queue = from_waiting ? src.waiting : src.running;
    auto req = queue[size_t(i)];
    queue.erase(queue.begin() + i);
    if (!from_waiting)
      src.kv_free_tokens += req.context_tokens;
    dst.kv_free_tokens -= req.context_tokens;
    dst.running.push_back(req);
    out.push_back({req.id, src.id, dst.id, from_waiting});
    *hi = load_index(src, mean_rate);
    *lo = load_index(dst, mean_rate);
  }
  return out;
}

std::vector<migration> reactive_balancer::tick(std::vector<gen_worker> workers) {
  ++ticks_;
  const auto cooldown = uint64_t(std::max(0, params_.cooldown_ticks));
  std::erase_if(moved_at_, [&](auto& e) { return e.second + cooldown <= ticks_; });
  for (auto& w : workers)
    for (auto* queue : {&w.running, &w.waiting})
      for (auto& r : *queue)
        r.pinned = r.pinned || moved_at_.count(r.id) > 0;
  auto moves = plan_migrations(workers, params_);
  for (auto& m : moves)
    moved_at_[m.request] = ticks_;
  migrations_ += moves.size();
  return moves;
}

} // namespace loom
