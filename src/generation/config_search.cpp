#include "generation/config_search.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "generation/batch_sim.hpp"
#include "generation/engine_sim.hpp"

namespace loom {

namespace {

constexpr double infinity = std::numeric_limits<double>::infinity();

/// The step time of a lone request on `d`'s fastest instance: how latency-ward it is.
double lone_step_s(const engine_model& engine, const gen_deployment& d) {
  const double base = engine.decode_step_s(d.parallel, 1, 0.0);
  return d.mixed() ? std::min(base, engine.decode_step_s(d.latency, 1, 0.0)) : base;
}

/// Mixed deployments (§4.1, "keep a latency instance for the longest requests"): outside a
/// large batch, intra-node TP instances with one or two instances of a TP, up to two whole
/// nodes and at most half the budget, that decodes a lone request faster. EP and AFD serve
/// big batches and stay homogeneous.
void add_mixed(const engine_model& engine, int budget, bool tail, const planner_params& p,
               std::vector<gen_deployment>& out) {
  std::vector<parallel_config> tps;
  for (int tp = 1; tp <= std::min(budget / 2, 2 * p.gpus_per_node); tp *= 2)
    if (engine.kv_capacity_tokens(tp) > 0 && engine.comparable(tp))
      tps.emplace_back(tp);
  for (auto& base : tps) {
    if (base.tp > p.gpus_per_node || (tail && base.tp == 1))
      continue;
    const double lone = engine.decode_step_s(base, 1, 0.0);
    for (auto& latency : tps)
      for (int n = 1; n <= 2 && n * latency.gpus() <= budget / 2; ++n) {
        const int rest = budget - n * latency.gpus();
        if (engine.decode_step_s(latency, 1, 0.0) < lone && rest % base.gpus() == 0)
          out.push_back({base, rest / base.gpus(), latency, n});
      }
  }
}

std::vector<gen_deployment> candidates(const engine_model& engine, int budget,
                                       const gen_deployment& current, size_t pending,
                                       const planner_params& p) {
  const double per_gpu = double(pending) / budget;
  const bool throughput = per_gpu >= p.large_batch_per_gpu;
  const bool tail = per_gpu < 1;
  std::vector<gen_deployment> out;
  auto add = [&](const parallel_config& c) {
    const int g = c.gpus();
    if (g <= budget && budget % g == 0 && engine.kv_capacity_tokens(c) > 0
        && engine.comparable(c))
      out.push_back({c, budget / g});
  };
  for (int tp = 1; tp <= p.gpus_per_node; tp *= 2)
    if (!(tail && tp == 1)) // the tail wants latency: a single GPU per request is slow
      add(tp);
  if (!throughput) // cross-node TP, whole nodes only, outside big batches
    for (int tp = 2 * p.gpus_per_node; tp <= budget; tp *= 2)
      add(tp);
  if (engine.model().moe() && !tail) // EP over one or two whole nodes
    for (int ep = p.gpus_per_node; ep <= 2 * p.gpus_per_node; ep *= 2)
      for (int tp : {1, 2})
        add(parallel_config::expert_parallel(ep, tp));
  if (throughput) // AFD hides its communication only behind big batches
    for (auto& c : p.afd_configs)
      add(c);
  else
    add_mixed(engine, budget, tail, p, out);
  if (current.instances > 0 && std::find(out.begin(), out.end(), current) == out.end())
    out.push_back(current);
  return out;
}

} // namespace

std::vector<parallel_config> throughput_configs(const engine_model& engine, int budget,
                                                const planner_params& p) {
  const auto full = size_t(std::ceil(p.large_batch_per_gpu * budget));
  std::vector<parallel_config> out;
  for (auto& d : candidates(engine, budget, {}, full, p))
    out.push_back(d.parallel);
  return out;
}

namespace {

/// What an assignment balances: the sampled remaining lengths (scoring a candidate: each
/// instance gets its share of the forecast distribution), or each request's expected remaining
/// (placing: which request carries which sampled length is a guess).
enum class balance_on : uint8_t { sampled, expected };

int64_t weight(const gen_request_state& r, balance_on on) {
  return on == balance_on::expected ? r.load() : r.remaining;
}

/// Heaviest first, ties in input order: a stable radix sort, 11 bits a pass, of each weight's
/// distance below the heaviest (a few passes: weights are token counts). Planning sorts every
/// checkpoint's requests, and a comparison sort was a tenth of a plan.
std::vector<size_t> longest_first_order(const std::vector<gen_request_state>& reqs,
                                        balance_on on = balance_on::sampled) {
  constexpr int bits = 11;
  constexpr uint64_t mask = (uint64_t(1) << bits) - 1;
  std::vector<uint64_t> key(reqs.size());
  int64_t heaviest = std::numeric_limits<int64_t>::min();
  for (auto& r : reqs)
    heaviest = std::max(heaviest, weight(r, on));
  uint64_t widest = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    key[i] = uint64_t(heaviest - weight(reqs[i], on));
    widest |= key[i];
  }
  std::vector<size_t> order(reqs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::vector<size_t> next(reqs.size());
  for (int shift = 0; shift == 0 || (widest >> shift) != 0; shift += bits) {
    std::array<size_t, mask + 2> start{};
    for (auto i : order)
      ++start[((key[i] >> shift) & mask) + 1];
    for (size_t b = 1; b < start.size(); ++b)
      start[b] += start[b - 1];
    for (auto i : order)
      next[start[(key[i] >> shift) & mask]++] = i;
    order.swap(next);
  }
  return order;
}

/// What the lower bounds read of a set of requests, once for every candidate scored on it:
/// the tokens left to generate, the context tokens their steps will read, and the requests no
/// other outlasts in both remaining tokens and context (the longest lone run is one of them:
/// a step never gets cheaper with more context).
struct request_summary {
  double total = 0;
  double read = 0;
  std::vector<std::pair<double, double>> outlasting; // (remaining, context)
};

/// `longest_first`: the requests by remaining, longest first (longest_first_order).
request_summary summarize(const std::vector<gen_request_state>& reqs,
                          const std::vector<size_t>& longest_first) {
  request_summary s;
  for (auto& r : reqs) {
    s.total += double(r.remaining);
    const double n = double(std::max<int64_t>(r.remaining, 0));
    s.read += n * double(r.context) + n * (n - 1) / 2; // context_r + t at its t-th token
  }
  double widest = -1;
  for (auto i : longest_first)
    if (double(reqs[i].context) > widest && reqs[i].remaining > 0) {
      widest = double(reqs[i].context);
      s.outlasting.emplace_back(double(reqs[i].remaining), widest);
    }
  return s;
}

double makespan_lower_bound(const engine_model& engine, const gen_deployment& d,
                            const request_summary& s) {
  // Once per config: a MoE step's terms cost a pow.
  const auto alone = engine.decode_terms(d.parallel, 1);
  const auto latency_alone = engine.decode_terms(d.mixed() ? d.latency : d.parallel, 1);
  double longest = 0;
  for (auto [remaining, context] : s.outlasting) {
    const double step =
      d.mixed() ? std::min(alone.at(context), latency_alone.at(context)) : alone.at(context);
    longest = std::max(longest, remaining * step);
  }
  auto best_rate = [&](const parallel_config& config) {
    double best = 0;
    const int most = engine.max_batch(config);
    for (int b = 1; b < 2 * most; b *= 2) {
      const int batch = std::min(b, most);
      best = std::max(best, batch / engine.decode_step_s(config, batch, 0.0));
    }
    return best;
  };
  double rate = d.instances * best_rate(d.parallel);
  if (d.mixed())
    rate += d.latency_instances * best_rate(d.latency);
  return std::max(longest, s.total / rate);
}

/// The least loaded instance, ties to the lowest index, as a tournament tree: a load change is
/// one walk to the root, where a heap pops and pushes. Each node holds its winner's load, so a
/// walk compares neighbours without reaching back into the leaves. Loads are token counts,
/// whole numbers: integer compares keep the walk's dependency chain short. An excluded instance
/// is never the least.
class least_loaded {
public:
  explicit least_loaded(const std::vector<int64_t>& load) {
    while (leaves_ < load.size())
      leaves_ *= 2;
    tree_.assign(2 * leaves_, node{});
    for (size_t k = 0; k < load.size(); ++k)
      tree_[leaves_ + k] = {load[k], k};
    for (size_t n = leaves_ - 1; n > 0; --n)
      tree_[n] = winner(tree_[2 * n], tree_[2 * n + 1]);
  }
  /// The least loaded instance not excluded, or `none`.
  size_t top() const { return tree_[1].load == excluded ? none : tree_[1].index; }
  void set(size_t k, int64_t load) {
    // The winner is carried up in two scalars (registers): each level reads only the sibling,
    // and the left one keeps ties. Branch-free: which side wins is a coin flip to a predictor.
    size_t n = leaves_ + k;
    tree_[n].load = load;
    for (; n > 1; n /= 2) {
      const node& sibling = tree_[n ^ 1];
      // A left sibling (n odd) wins ties: it needs to be under load + 1.
      const bool sibling_wins = sibling.load < load + int64_t(n & 1);
      const auto mask = size_t(0) - size_t(sibling_wins);
      k ^= (k ^ sibling.index) & mask;
      load ^= (load ^ sibling.load) & int64_t(mask);
      tree_[n / 2].load = load;
      tree_[n / 2].index = k;
    }
  }
  void exclude(size_t k) { set(k, excluded); }
  static constexpr size_t none = std::numeric_limits<size_t>::max();

private:
  // One under the largest: load + 1 above stays defined.
  static constexpr int64_t excluded = std::numeric_limits<int64_t>::max() - 1;
  struct node {
    int64_t load = excluded; // padding and excluded instances never win
    size_t index = none;
  };
  static const node& winner(const node& a, const node& b) { return b.load < a.load ? b : a; }
  std::vector<node> tree_;
  size_t leaves_ = 1;
};

/// Eq. 2's band of KV utilisation, mu - delta to mu + delta, of instances of `cap` tokens.
struct kv_band {
  double low = 0;
  double high = 0;
  double cap = 1;
};

/// Eq. 2's lower side: while an instance is below the band, the fullest instance gives it the
/// largest of its movable requests that keeps both inside the band; stops when none is below
/// or no such request exists. The greedy fills the upper side; this one rarely has work.
void lift_underused(const std::vector<gen_request_state>& reqs, const std::vector<int>& fixed,
                    const kv_band& band, std::vector<int>& out, std::vector<double>& kv) {
  for (size_t moves = 0; moves < reqs.size(); ++moves) {
    const auto low = size_t(std::min_element(kv.begin(), kv.end()) - kv.begin());
    const auto high = size_t(std::max_element(kv.begin(), kv.end()) - kv.begin());
    if (kv[low] >= band.low * band.cap || low == high)
      return;
    size_t best = reqs.size();
    for (size_t i = 0; i < reqs.size(); ++i) {
      const double c = double(reqs[i].context);
      if (fixed[i] < 0 && out[i] == int(high) && kv[low] + c <= band.high * band.cap
          && kv[high] - c >= band.low * band.cap
          && (best == reqs.size() || c > double(reqs[best].context)))
        best = i;
    }
    if (best == reqs.size())
      return;
    out[best] = int(low);
    kv[low] += double(reqs[best].context);
    kv[high] -= double(reqs[best].context);
  }
}

/// Longest first (`longest_first` orders every request so, once per plan) onto the least
/// loaded instance whose KV utilisation stays within mu + delta (Eq. 2); the least utilised
/// one if none does. Then the band's lower side.
std::vector<int> balanced_assignment(const engine_model& engine, const gen_deployment& d,
                                     const std::vector<gen_request_state>& reqs,
                                     const std::vector<size_t>& longest_first,
                                     const std::vector<int>& fixed, const planner_params& p,
                                     balance_on on = balance_on::sampled) {
  const double cap = double(engine.kv_capacity_tokens(d.parallel));
  std::vector<int64_t> load(size_t(d.instances), 0);
  std::vector<double> kv(size_t(d.instances), 0.0);
  std::vector<int> out = fixed;
  double total_kv = 0;
  for (auto& r : reqs)
    total_kv += double(r.context);
  const double mu = total_kv / (cap * d.instances);
  const double limit = mu + p.kv_balance_delta;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (out[i] >= 0) {
      load[size_t(out[i])] += weight(reqs[i], on);
      kv[size_t(out[i])] += double(reqs[i].context);
    }
  least_loaded least{load};
  std::vector<size_t> skipped;
  for (auto i : longest_first) {
    if (out[i] >= 0)
      continue;
    int chosen = -1;
    for (auto k = least.top(); k != least_loaded::none; k = least.top()) {
      if ((kv[k] + double(reqs[i].context)) / cap <= limit) {
        chosen = int(k);
        break;
      }
      least.exclude(k);
      skipped.push_back(k);
    }
    if (chosen < 0) // nowhere within the band: the least utilised instance
      chosen = int(std::min_element(kv.begin(), kv.end()) - kv.begin());
    for (auto k : skipped)
      least.set(k, load[k]);
    skipped.clear();
    out[i] = chosen;
    load[size_t(chosen)] += weight(reqs[i], on);
    kv[size_t(chosen)] += double(reqs[i].context);
    least.set(size_t(chosen), load[size_t(chosen)]);
  }
  lift_underused(reqs, fixed, {mu - p.kv_balance_delta, limit, cap}, out, kv);
  return out;
}

/// Which requests still to place go to a mixed deployment's latency instances: the
/// `long_count` with the longest expected lengths. Which request will be long is not known:
/// requests whose expected lengths are within the forecast's resolution of the longest left are
/// taken as exchangeable (a step's requests started together and differ in progress mostly by their
/// instances' pace), so from the block where the count runs out the latency instances take an
/// evenly spread sample of its `on` weights, not its heaviest. Scoring on sampled lengths that
/// let them take the sampled longest would be an oracle's: the forecast hands its longest
/// samples to the most advanced requests (on gen-qwen14b-25k a mixed deployment scored 118 s
/// at the switch and 236 s one plan later, on the requests it had been given).
std::vector<bool> latency_members(const std::vector<gen_request_state>& reqs,
                                  const std::vector<int>& fixed, size_t long_count,
                                  double resolution, balance_on on) {
  std::vector<size_t> order;
  for (size_t i = 0; i < reqs.size(); ++i)
    if (fixed[i] < 0)
      order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (reqs[a].expected_length() != reqs[b].expected_length())
      return reqs[a].expected_length() > reqs[b].expected_length();
    return weight(reqs[a], on) > weight(reqs[b], on);
  });
  std::vector<bool> out(reqs.size(), false);
  const double tell_apart = 1 / (1 + resolution);
  for (size_t begin = 0; begin < order.size() && long_count > 0;) {
    size_t end = begin;
    while (end < order.size()
           && double(reqs[order[end]].expected_length())
                >= tell_apart * double(reqs[order[begin]].expected_length()))
      ++end;
    std::stable_sort(order.begin() + long(begin), order.begin() + long(end),
                     [&](size_t a, size_t b) { return weight(reqs[a], on) > weight(reqs[b], on); });
    const size_t block = end - begin;
    const size_t take = std::min(block, long_count);
    for (size_t j = 0; j < take; ++j) // ranks (j + 1/2) * block / take
      out[order[begin + (2 * j + 1) * block / (2 * take)]] = true;
    long_count -= take;
    begin = end;
  }
  return out;
}

/// A mixed deployment's assignment: the latency instances take `latency_members`, the others
/// the rest; each group is balanced as above on `on`. Requests kept in place stay in their
/// instance's group.
std::vector<int> mixed_assignment(const engine_model& engine, const gen_deployment& d,
                                  const std::vector<gen_request_state>& reqs,
                                  const std::vector<int>& fixed, size_t long_count,
                                  const planner_params& p, balance_on on) {
  struct group {
    gen_deployment part;
    int offset = 0;
    std::vector<size_t> members;
  };
  std::array<group, 2> groups{{{{d.parallel, d.instances}, 0, {}},
                               {{d.latency, d.latency_instances}, d.instances, {}}}};
  const auto latency = latency_members(reqs, fixed, long_count, p.length_resolution, on);
  for (size_t i = 0; i < reqs.size(); ++i)
    groups[latency[i] || fixed[i] >= d.instances ? 1 : 0].members.push_back(i);
  std::vector<int> out = fixed;
  for (auto& g : groups) {
    std::vector<gen_request_state> part;
    std::vector<int> part_fixed;
    for (auto i : g.members) {
      part.push_back(reqs[i]);
      part_fixed.push_back(fixed[i] >= 0 ? fixed[i] - g.offset : -1);
    }
    auto placed = balanced_assignment(engine, g.part, part, longest_first_order(part, on),
                                      part_fixed, p, on);
    for (size_t j = 0; j < g.members.size(); ++j)
      out[g.members[j]] = placed[j] + g.offset;
  }
  return out;
}

std::vector<int> assignment_on(const engine_model& engine, const gen_deployment& d,
                               const std::vector<gen_request_state>& reqs,
                               const std::vector<size_t>& longest_first,
                               const std::vector<int>& fixed, size_t long_count,
                               const planner_params& p, balance_on on = balance_on::sampled) {
  return d.mixed() ? mixed_assignment(engine, d, reqs, fixed, long_count, p, on)
                   : balanced_assignment(engine, d, reqs, longest_first, fixed, p, on);
}

/// The instance of each request that stays where it is (`keep`: those placed on one of `d`'s
/// instances), -1 for the requests to place.
std::vector<int> kept_in_place(const gen_deployment& d, const std::vector<gen_request_state>& reqs,
                               bool keep) {
  std::vector<int> fixed(reqs.size(), -1);
  if (keep)
    for (size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i].instance >= 0 && reqs[i].instance < d.size())
        fixed[i] = reqs[i].instance;
  return fixed;
}

/// C_sw: every GPU loads its new shard of the weights, and the engines restart, the slowest
/// group last; a standby config skips the warm-up.
double switch_cost_s(const engine_model& engine, const gen_deployment& d,
                     const planner_params& p) {
  const auto costs = engine_sim_costs_of(p);
  auto group_s = [&](const parallel_config& c) {
    return costs.reshard_s(engine, c,
                           std::find(p.standby.begin(), p.standby.end(), c) != p.standby.end());
  };
  return d.mixed() ? std::max(group_s(d.parallel), group_s(d.latency)) : group_s(d.parallel);
}

struct evaluation {
  double objective = infinity;
  double switch_s = 0;
  double migrate_s = 0;
  std::vector<int> assignment;
  size_t long_count = 0; // mixed: how many of the longest requests the latency instances took
  std::vector<double> finishes; // each request's finish time (unsorted), when it ran to the end
};

/// Eq. 1 for deployment `d` with `assignment`. At or past `cutoff` the objective is only
/// known to be there (infinity): the instances stop simulating once one of them gets there.
/// The margin keeps a give-up out of the reach of rounding in the callers' own comparisons.
evaluation evaluate_assignment(const engine_model& engine, const gen_deployment& d,
                               bool is_current, const std::vector<gen_request_state>& reqs,
                               std::vector<int> assignment, const planner_params& p,
                               double cutoff = infinity) {
  evaluation e;
  e.assignment = std::move(assignment);
  e.finishes.reserve(reqs.size());
  std::vector<std::vector<sim_request>> per(size_t(d.size()));
  std::vector<int64_t> moved(size_t(d.size()), 0);
  std::vector<int64_t> moved_tokens(size_t(d.size()), 0);
  std::vector<size_t> count(size_t(d.size()), 0); // each instance's list allocated once
  for (auto k : e.assignment)
    ++count[size_t(k)];
  for (size_t k = 0; k < per.size(); ++k)
    per[k].reserve(count[k]);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto k = size_t(e.assignment[i]);
    bool stays = is_current && reqs[i].instance == e.assignment[i];
    // Moved KV is paid for by C_mig below, so the simulator sees it resident either way;
    // requests never placed still need their prefill.
    per[k].push_back({reqs[i].context, reqs[i].remaining, stays || reqs[i].instance >= 0});
    if (!stays && reqs[i].instance >= 0) {
      ++moved[k];
      moved_tokens[k] += reqs[i].context;
    }
  }
  if (!is_current)
    e.switch_s = switch_cost_s(engine, d, p);
  double worst = 0;
  decode_terms_table base{engine, d.parallel};
  decode_terms_table latency{engine, d.latency};
  const double give_up = cutoff + 1e-9 * (1.0 + std::abs(cutoff)) - e.switch_s;
  for (size_t k = 0; k < per.size(); ++k) {
    const auto& config = d.config_of(int(k));
    double mig = moved[k] > 0 ? kv_move_cost_of(engine, config, int(moved[k]),
                                                moved_tokens[k] / moved[k], p.kv_path)
                                  .best_s()
                              : 0.0;
    auto sim = simulate_instance(engine, config, per[k], config == d.parallel ? &base : &latency,
                                 give_up - mig, &e.finishes);
    if (!sim.feasible || sim.makespan_s == infinity)
      return evaluation{};
    e.migrate_s = std::max(e.migrate_s, mig);
    worst = std::max(worst, sim.makespan_s + mig);
  }
  e.objective = worst + e.switch_s;
  return e;
}

/// Eq. 1 for deployment `d`. `keep` leaves placed requests where they are (the current
/// deployment as it stands); otherwise every request is placed afresh, and those that land
/// elsewhere pay C_mig. A deployment other than the current one also pays C_sw. A mixed one
/// is scored with its latency instances taking 1, 2, 4, ... of the longest requests each, up
/// to their share of the GPUs, and keeps the best split. `cutoff` as in evaluate_assignment.
evaluation evaluate(const engine_model& engine, const gen_deployment& d, bool is_current,
                    bool keep, const std::vector<gen_request_state>& reqs,
                    const std::vector<size_t>& longest_first, const planner_params& p,
                    double cutoff = infinity) {
  const auto fixed = kept_in_place(d, reqs, keep);
  if (!d.mixed())
    return evaluate_assignment(engine, d, is_current, reqs,
                               balanced_assignment(engine, d, reqs, longest_first, fixed, p), p,
                               cutoff);
  const auto to_place = size_t(std::count(fixed.begin(), fixed.end(), -1));
  const size_t share = to_place * size_t(d.latency_instances * d.latency.gpus()) / size_t(d.gpus());
  evaluation best;
  for (size_t n = size_t(d.latency_instances); n <= std::max(share, size_t(d.latency_instances));
       n *= 2) {
    auto e = evaluate_assignment(
      engine, d, is_current, reqs,
      mixed_assignment(engine, d, reqs, fixed, n, p, balance_on::sampled), p,
      std::min(cutoff, best.objective));
    e.long_count = n;
    if (e.objective < best.objective)
      best = std::move(e);
  }
  return best;
}

/// The pending requests as they would stand when `d`, running them where `assignment` puts
/// them, is down to each of `counts` unfinished requests (descending); one checkpoint per count
/// reached before the end and before `until_s` (the callers stop there). `finishes`: when each
/// request finished in the scoring run of that placement, which tells when the counts are
/// reached. A request admitted (or resident) keeps its instance and KV.
struct checkpoint {
  double at_s = 0;
  std::vector<gen_request_state> pending;
};

std::vector<checkpoint> run_to_checkpoints(const engine_model& engine, const gen_deployment& d,
                                           const std::vector<gen_request_state>& reqs,
                                           const std::vector<int>& assignment,
                                           std::vector<double> finishes,
                                           const std::vector<size_t>& counts,
                                           double until_s) {
  decode_terms_table base{engine, d.parallel};
  decode_terms_table latency{engine, d.latency};
  std::vector<instance_sim> sims;
  for (int k = 0; k < d.size(); ++k)
    sims.emplace_back(engine, d.config_of(k), d.config_of(k) == d.parallel ? &base : &latency);
  for (size_t i = 0; i < reqs.size(); ++i)
    sims[size_t(assignment[i])].add(i, {reqs[i].context, reqs[i].remaining, reqs[i].instance >= 0});
  std::vector<checkpoint> out;
  auto selected = finishes.begin(); // the ranks rise: each selection works right of the last
  for (auto left : counts) {
    if (left == 0 || left >= finishes.size())
      continue;
    const auto rank = finishes.end() - std::ptrdiff_t(left) - 1;
    std::nth_element(selected, rank, finishes.end());
    selected = rank + 1;
    checkpoint c;
    c.at_s = *rank;
    if (c.at_s >= until_s)
      break;
    c.pending.reserve(left + sims.size());
    for (size_t k = 0; k < sims.size(); ++k) {
      sims[k].advance_to(c.at_s);
      sims[k].for_each_request([&](const request_progress& r) {
        c.pending.push_back({reqs[r.id].id, r.state.context, r.state.remaining,
                             r.state.kv_resident ? int(k) : -1});
      });
    }
    out.push_back(std::move(c));
  }
  return out;
}

/// A homogeneous config's least step cost per unit of work, over every batch size it runs:
/// for each line of its step terms, the least a generated token costs (the line's batch part
/// and the fixed part, per request in the batch) and the least a context token read costs.
struct token_floors {
  parallel_config config;
  int lines = 0;
  std::array<double, 4> per_generated{};
  std::array<double, 4> per_context{};
};

token_floors floors_of(const engine_model& engine, const parallel_config& config) {
  token_floors f{config};
  f.per_generated.fill(infinity);
  f.per_context.fill(infinity);
  for (int b = 1; b <= engine.max_batch(config); ++b) {
    const auto t = engine.decode_terms(config, b);
    f.lines = t.count;
    for (size_t j = 0; j < size_t(t.count); ++j) {
      f.per_generated[j] = std::min(f.per_generated[j], (t.lines[j].base + t.fixed) / b);
      f.per_context[j] = std::min(f.per_context[j], t.lines[j].per_token);
    }
  }
  return f;
}

/// work_lower_bound from floors and a summary computed once (the look-ahead prunes with it).
double work_lower_bound(const token_floors& f, int instances, const request_summary& s) {
  double bound = 0;
  for (size_t j = 0; j < size_t(f.lines); ++j)
    bound = std::max(bound, f.per_generated[j] * s.total + f.per_context[j] * s.read);
  return bound / instances;
}

/// token_floors of the configs the look-ahead meets, each computed once.
class floors_cache {
public:
  explicit floors_cache(const engine_model& engine) : engine_(&engine) {}
  /// Whether pruning `requests` on `c` with the work bound can pay: its floors cost one step
  /// model per batch size, about what scoring that many requests costs.
  bool pays(const parallel_config& c, size_t requests) const {
    return requests > size_t(engine_->max_batch(c));
  }
  const token_floors& of(const parallel_config& c) {
    for (auto& f : known_)
      if (f.config == c)
        return f;
    return known_.emplace_back(floors_of(*engine_, c));
  }

private:
  const engine_model* engine_;
  std::vector<token_floors> known_;
};

/// The look-ahead (OrchestrRL §4.1, third heuristic): keep the current deployment while the
/// batch is large and switch to a latency mode (one that decodes a lone request faster) only
/// once the pending requests fall to a point, rather than now. The later plans are homogeneous:
/// scoring every mixed split at every point took 1.4 s at 1,024 GPUs (bench_generation), and
/// a mixed deployment is still scored when its point comes. Checks the points where 3/4,
/// 9/16, ... of them remain, and stops at the first plan that beats `bar`; returns its
/// objective, costs included (infinity if none does).
double deferred_switch_s(const engine_model& engine, int budget, const gen_deployment& current,
                         const evaluation& staying, const std::vector<gen_request_state>& reqs,
                         double bar, const planner_params& p) {
  std::vector<size_t> counts;
  for (size_t left = reqs.size() * 3 / 4; left > 0; left = left * 3 / 4)
    counts.push_back(left);
  const double lone_now = lone_step_s(engine, current);
  floors_cache floors{engine};
  for (auto& c : run_to_checkpoints(engine, current, reqs, staying.assignment, staying.finishes,
                                    counts, bar)) {
    const auto order = longest_first_order(c.pending);
    const auto summary = summarize(c.pending, order);
    for (auto& later : candidates(engine, budget, current, c.pending.size(), p)) {
      if (later.mixed() || lone_step_s(engine, later) >= lone_now)
        continue;
      const double from = c.at_s + switch_cost_s(engine, later, p);
      if (from + makespan_lower_bound(engine, later, summary) >= bar
          || (floors.pays(later.parallel, c.pending.size())
              && from + work_lower_bound(floors.of(later.parallel), later.instances, summary)
                   >= bar))
        continue;
      auto e = evaluate(engine, later, false, false, c.pending, order, p, bar - c.at_s);
      if (c.at_s + e.objective < bar)
        return c.at_s + e.objective;
    }
  }
  return infinity;
}

/// Starting a new batch on `d` (scored `e`) and switching to a config that decodes a lone
/// request faster once 3/4, 9/16, ... of the batch is left, whichever time is least: what a
/// start is worth to Alg. 1, which re-plans during the step (§4.1: throughput first, then the
/// tail). `e` alone if no later switch beats it; a later switch counts only where it would
/// beat staying on `d` by the measured error, as the step's own decisions will demand.
double with_tail_switch_s(const engine_model& engine, int budget, const gen_deployment& d,
                          const evaluation& e, const std::vector<gen_request_state>& reqs,
                          const planner_params& p) {
  double best = e.objective;
  if (best == infinity)
    return best; // it cannot run: no run to switch from
  auto to_beat = [&](double at) { // what a later switch at `at` must take less than to count
    const double staying = e.objective - at;
    return staying - std::max(p.epsilon_s, p.error_margin * staying);
  };
  std::vector<size_t> counts;
  for (size_t left = reqs.size() * 3 / 4; left > 0; left = left * 3 / 4)
    counts.push_back(left);
  const double lone = lone_step_s(engine, d);
  floors_cache floors{engine};
  // Past e.objective less the switch, the loop below stops (the margin outruns rounding).
  const double until = e.objective - e.switch_s + 1e-9 * (1.0 + std::abs(e.objective));
  for (auto& c :
       run_to_checkpoints(engine, d, reqs, e.assignment, e.finishes, counts, until)) {
    const double at = e.switch_s + c.at_s;
    if (at >= best)
      break;
    const auto order = longest_first_order(c.pending);
    const auto summary = summarize(c.pending, order);
    for (auto& later : candidates(engine, budget, d, c.pending.size(), p)) {
      if (later.mixed() || lone_step_s(engine, later) >= lone)
        continue;
      const double from = at + switch_cost_s(engine, later, p);
      if (from + makespan_lower_bound(engine, later, summary) >= best
          || (floors.pays(later.parallel, c.pending.size())
              && from + work_lower_bound(floors.of(later.parallel), later.instances, summary)
                   >= best))
        continue;
      const double later_s = evaluate(engine, later, false, false, c.pending, order, p,
                                      std::min(best - at, to_beat(at)))
                               .objective;
      if (later_s < to_beat(at))
        best = std::min(best, at + later_s);
    }
  }
  return best;
}

/// A new batch: every start scored with its best later tail switch (with_tail_switch_s), the
/// current's as Obj_cur, and the best start as the candidate to beat it.
void start_with_tail_switch(const engine_model& engine, int budget, const gen_deployment& current,
                            const std::vector<gen_request_state>& reqs, const planner_params& p,
                            gen_plan& plan,
                            std::vector<std::pair<gen_deployment, evaluation>>& starts,
                            evaluation& best, gen_deployment& best_config) {
  best.objective = infinity;
  for (auto& [d, e] : starts) {
    const double value = with_tail_switch_s(engine, budget, d, e, reqs, p);
    for (auto& c : plan.evaluated)
      if (c.config == d)
        c.objective_s = value;
    if (d == current)
      plan.current_s = value;
    e.objective = value;
    if (value < best.objective) {
      best = e;
      best_config = d;
    }
  }
}

/// The current deployment first (its Obj_cur is always needed), then by lower bound, so that
/// good candidates tighten the bar early.
std::vector<size_t> search_order(const std::vector<gen_deployment>& options,
                                 const gen_deployment& current, const std::vector<double>& bound) {
  std::vector<size_t> order(options.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((options[a] == current) != (options[b] == current))
      return options[a] == current;
    return bound[a] < bound[b];
  });
  return order;
}

/// Obj_cur. The current deployment may also re-place its requests (what the balancer does,
/// at C_mig): a switch must win on the parallel config, not on a placement made under older
/// length estimates.
void score_current(const engine_model& engine, const gen_deployment& d, double bound,
                   const std::vector<gen_request_state>& requests,
                   const std::vector<size_t>& longest_first, const planner_params& params,
                   evaluation& e) {
  if (bound < e.objective
      && std::any_of(requests.begin(), requests.end(), [](auto& r) { return r.instance >= 0; }))
    e.objective = std::min(e.objective, evaluate(engine, d, true, false, requests, longest_first,
                                                 params, e.objective)
                                          .objective);
}

/// Where the chosen deployment's requests go: balanced on their expected remaining lengths
/// (`scored`, the assignment the candidate was scored with, when every length is known).
std::vector<int> placement(const engine_model& engine, const gen_deployment& d, bool keep,
                           const std::vector<gen_request_state>& reqs, std::vector<int> scored,
                           size_t long_count, const planner_params& p) {
  if (scored.size() != reqs.size()
      || std::none_of(reqs.begin(), reqs.end(), [](auto& r) { return r.expected > 0; }))
    return scored;
  const auto fixed = kept_in_place(d, reqs, keep);
  if (std::none_of(fixed.begin(), fixed.end(), [](int k) { return k < 0; }))
    return scored; // everything stays where it is: nothing to place
  return assignment_on(engine, d, reqs, longest_first_order(reqs, balance_on::expected), fixed,
                       long_count, p, balance_on::expected);
}

} // namespace

double makespan_lower_bound(const engine_model& engine, const gen_deployment& d,
                            const std::vector<gen_request_state>& reqs) {
  return makespan_lower_bound(engine, d, summarize(reqs, longest_first_order(reqs)));
}

double work_lower_bound(const engine_model& engine, const parallel_config& config, int instances,
                        const std::vector<gen_request_state>& reqs) {
  return work_lower_bound(floors_of(engine, config), instances,
                          summarize(reqs, longest_first_order(reqs)));
}

double objective_of(const engine_model& engine, int gpu_budget, const gen_deployment& d,
                    const gen_deployment& current,
                    const std::vector<gen_request_state>& requests, const planner_params& params) {
  const bool is_current = d == current;
  const auto longest_first = longest_first_order(requests);
  auto e = evaluate(engine, d, is_current, is_current, requests, longest_first, params);
  if (params.look_ahead && new_batch(requests) && !d.mixed())
    return with_tail_switch_s(engine, gpu_budget, d, e, requests, params);
  if (is_current)
    score_current(engine, d, 0.0, requests, longest_first, params, e);
  return e.objective;
}

bool new_batch(const std::vector<gen_request_state>& requests) {
  return !requests.empty() && std::all_of(requests.begin(), requests.end(), [](auto& r) {
    return r.instance < 0 && r.generated == 0;
  });
}

namespace {

/// What the candidate search found: the best candidate by Eq. 1, and on a new batch every
/// homogeneous start scored, for start_with_tail_switch.
struct search_result {
  evaluation best;
  gen_deployment best_config;
  evaluation current; // the current deployment as placed, before score_current
  std::vector<std::pair<gen_deployment, evaluation>> starts;
};

/// Scores the candidates (Eq. 1, the current one first), recording each in `plan` with the
/// current's Obj_cur and placement. A candidate whose lower bound cannot beat the best so far
/// is skipped, except on a new batch: a later tail switch can beat a whole run's bound.
search_result search(const engine_model& engine, int gpu_budget, const gen_deployment& current,
                     const std::vector<gen_request_state>& requests,
                     const std::vector<size_t>& longest_first, bool start,
                     const planner_params& params, gen_plan& plan) {
  search_result out;
  out.best_config = current;
  auto options = candidates(engine, gpu_budget, current, requests.size(), params);
  const auto summary = summarize(requests, longest_first);
  std::vector<double> bound;
  for (auto& d : options)
    bound.push_back(makespan_lower_bound(engine, d, summary)
                    + (d == current ? 0.0 : switch_cost_s(engine, d, params)));
  for (auto i : search_order(options, current, bound)) {
    const auto& d = options[i];
    bool is_current = d == current;
    if (!is_current && !start && bound[i] >= out.best.objective) {
      plan.evaluated.push_back({d, bound[i], true});
      continue;
    }
    auto e = evaluate(engine, d, is_current, is_current, requests, longest_first, params);
    if (is_current) {
      plan.assignment = e.assignment;
      out.current = e;
      score_current(engine, d, bound[i], requests, longest_first, params, e);
      plan.current_s = e.objective;
    }
    plan.evaluated.push_back({d, e.objective, false});
    if (start && !d.mixed())
      out.starts.emplace_back(d, e);
    if (e.objective < out.best.objective) {
      out.best = std::move(e);
      out.best_config = d;
    }
  }
  return out;
}

/// What the decision was preferred to: the current deployment for a switch, else the best
/// other candidate scored (plan_error scores the comparison once the lengths are known).
void note_alternative(gen_plan& plan, const gen_deployment& current, bool reconfigure) {
  if (reconfigure) {
    plan.alternative = current;
    plan.alternative_s = plan.current_s;
    return;
  }
  for (auto& c : plan.evaluated)
    if (!c.pruned && !(c.config == current) && c.objective_s < plan.alternative_s) {
      plan.alternative = c.config;
      plan.alternative_s = c.objective_s;
    }
}

} // namespace

gen_plan plan_generation(const engine_model& engine, int gpu_budget,
                         const gen_deployment& current,
                         const std::vector<gen_request_state>& requests,
                         const planner_params& params) {
  gen_plan plan;
  plan.config = current;
  plan.current_s = infinity;
  plan.objective_s = infinity;
  const bool start = params.look_ahead && new_batch(requests);
  const auto longest_first = longest_first_order(requests);
  auto [best, best_config, staying, starts] =
    search(engine, gpu_budget, current, requests, longest_first, start, params, plan);
  if (start)
    start_with_tail_switch(engine, gpu_budget, current, requests, params, plan, starts, best,
                           best_config);
  // Alg. 1, event 1: Obj_new (costs included) must beat Obj_cur by more than epsilon and,
  // during a step, the measured error (a switch there trades a running deployment for a
  // forecast gain; a new batch weighs every start alike, staying included). Switching now
  // must not lose by more than epsilon to switching later: both switch, and the forecast's
  // error is theirs alike.
  const double margin = start ? params.epsilon_s
                              : std::max(params.epsilon_s, params.error_margin * plan.current_s);
  bool reconfigure = !(best_config == current) && best.objective < plan.current_s - margin;
  if (reconfigure && !start && params.look_ahead && plan.assignment.size() == requests.size()) {
    plan.deferred_s = deferred_switch_s(engine, gpu_budget, current, staying, requests,
                                        best.objective - params.epsilon_s, params);
    reconfigure = plan.deferred_s == infinity;
  }
  note_alternative(plan, current, reconfigure);
  if (reconfigure) {
    plan.config = best_config;
    plan.assignment = placement(engine, best_config, false, requests, std::move(best.assignment),
                                best.long_count, params);
    plan.objective_s = best.objective;
    plan.switch_s = best.switch_s;
    plan.migrate_s = best.migrate_s;
    plan.reconfigure = true;
  } else {
    plan.objective_s = plan.current_s;
    plan.assignment = placement(engine, current, true, requests, std::move(plan.assignment),
                                staying.long_count, params);
  }
  return plan;
}

std::vector<parallel_config> profile_afd_configs(const engine_model& engine, int gpus_per_node,
                                                 int batch, int64_t prompt, int64_t output,
                                                 size_t keep) {
  const std::vector<sim_request> reference(size_t(batch), sim_request{prompt, output, false});
  std::vector<std::pair<double, parallel_config>> scored;
  for (int total = gpus_per_node; total <= 2 * gpus_per_node; total *= 2)
    for (int attention = 1; attention < total; ++attention) {
      auto c = parallel_config::disaggregated(attention, total - attention);
      if (engine.kv_capacity_tokens(c) <= 0 || !engine.comparable(c))
        continue;
      auto run = simulate_instance(engine, c, reference);
      if (run.feasible && run.makespan_s > 0)
        scored.emplace_back(double(batch) * double(output) / run.makespan_s / total, c);
    }
  std::stable_sort(scored.begin(), scored.end(),
                   [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<parallel_config> out;
  for (size_t i = 0; i < scored.size() && i < keep; ++i)
    out.push_back(scored[i].second);
  return out;
}

} // namespace loom
