#include "generation/load_index.hpp"

#include <algorithm>
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

namespace {

/// Whether moving running request `r` onto `dst` pays (OrchestrRL App. A): the time it saves,
/// its expected remaining tokens (as many as it generated: lengths are heavy-tailed) at the
/// destination's pace instead of the source's, at least the waiting its KV move costs, the
/// destination's running batch included when the move is a recompute (kv_move_cost).
bool move_pays(const gen_request& r, double src_rate, const gen_worker& dst, double dst_rate) {
  if (src_rate <= 0 || dst_rate <= 0)
    return false;
  const double saved = double(std::max<int64_t>(r.generated, 1)) * (1 / src_rate - 1 / dst_rate);
  return saved >= r.move.best_s(int(dst.running.size()));
}

/// Index into `queue` of the shortest-context request the destination can take, or -1.
/// `running`: the queue is the running batch, whose requests move only if the move pays;
/// `dst_rate` is the pace the destination offers (an idle one: the fastest seen).
long pick(const std::vector<gen_request>& queue, bool running, const gen_worker& src,
          const gen_worker& dst, double dst_rate, const balancer_params& p) {
  long best = -1;
  auto reserve = int64_t(dst.running.size()) * p.growth_reserve_tokens;
  for (size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].pinned || dst.kv_free_tokens - queue[i].context_tokens < reserve)
      continue;
    if (running && !move_pays(queue[i], src.decode_rate_tps, dst, dst_rate))
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
  double fastest = 0;
  for (auto& w : workers) {
    mean_rate += w.decode_rate_tps / double(workers.size());
    fastest = std::max(fastest, w.decode_rate_tps);
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
    const double dst_rate = dst.running.empty() ? fastest : dst.decode_rate_tps;
    long i = pick(src.waiting, false, src, dst, dst_rate, p);
    if (i < 0) {
      from_waiting = false;
      i = pick(src.running, true, src, dst, dst_rate, p);
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
