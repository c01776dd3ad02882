#include "replay/cover_bound.hpp"

#include <glpk.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <utility>

namespace loom::replay {

namespace {

using lp_ptr = std::unique_ptr<glp_prob, decltype(&glp_delete_prob)>;

/// Appends a column covering `rows` (1-based) at `cost`.
void add_column(glp_prob* lp, const std::vector<int>& rows, double cost) {
  const int j = glp_add_cols(lp, 1);
  glp_set_col_bnds(lp, j, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp, j, cost);
  std::vector<int> index{0}; // GLPK's arrays start at 1
  std::vector<double> value{0};
  for (int r : rows) {
    index.push_back(r);
    value.push_back(1.0);
  }
  glp_set_mat_col(lp, j, int(rows.size()), index.data(), value.data());
}

/// Each job covered at least once: rows >= 1.
lp_ptr cover_rows(size_t jobs) {
  lp_ptr lp{glp_create_prob(), &glp_delete_prob};
  glp_set_obj_dir(lp.get(), GLP_MIN);
  glp_add_rows(lp.get(), int(jobs));
  for (size_t i = 0; i < jobs; ++i)
    glp_set_row_bnds(lp.get(), int(i) + 1, GLP_LO, 1.0, 0.0);
  return lp;
}

} // namespace

cover_bound::cover_bound(offline_optimum& groups) : groups_(groups) {
  glp_term_out(GLP_OFF);
}

int cover_bound::ordinal_of(const std::string& id) {
  return ordinals_.try_emplace(id, int(ordinals_.size())).first->second;
}

void cover_bound::price(const std::vector<const rl_job*>& jobs, const std::vector<double>& dual,
                        double tolerance, std::vector<column>& found) {
  std::set<int> widths;
  for (auto* j : jobs)
    widths.insert(groups_.training_gpus_for(*j));
  // A group's training pool is its widest member's: priced a width at a time, a group's
  // members' training times are fixed, which makes the training-pool test below monotone.
  for (int width : widths) {
    pricing_class c;
    for (size_t i = 0; i < jobs.size(); ++i)
      if (groups_.training_gpus_for(*jobs[i]) <= width) {
        c.jobs.push_back(jobs[i]);
        c.dual.push_back(dual[i]);
        c.training.push_back(groups_.member_plan(*jobs[i], {}, width, true).training_s);
        c.limit.push_back(offline_optimum::slo_limit_s(*jobs[i]));
        c.extent.push_back(groups_.extent_of(*jobs[i]));
      }
    c.width = width;
    c.prefix.assign(c.jobs.size() + 1, 0);
    for (size_t i = 0; i < c.jobs.size(); ++i)
      c.prefix[i + 1] = c.prefix[i] + c.dual[i];
    for (auto* j : c.jobs)
      c.ordinal.push_back(ordinal_of(j->id));
    std::vector<size_t> picked;
    visit(c, 0, {0, 0, std::numeric_limits<double>::infinity(), false, {}}, tolerance, picked,
          found);
  }
}

void cover_bound::visit(const pricing_class& c, size_t from, const partial& sofar,
                        double tolerance, std::vector<size_t>& picked,
                        std::vector<column>& found) {
  // Depth first over groups in dual order. A group's cost is at least its floor, and a larger
  // group's duals at most these plus the next-highest ones: a subtree whose floor minus that
  // stays above zero holds no column worth adding, and is skipped whole. So is one whose
  // members' trainings already outlast a member's SLO (offline_optimum::trainings_fit_slos):
  // more members only add training and SLOs.
  const size_t n = c.jobs.size();
  const size_t most = size_t(std::max(1, groups_.max_group_size()));
  for (size_t m = from; m < n; ++m) {
    const rl_job& job = *c.jobs[m];
    partial next{sofar.duals + c.dual[m], sofar.training + c.training[m],
                 std::min(sofar.limit, c.limit[m]),
                 sofar.widest || groups_.training_gpus_for(job) == c.width,
                 sofar.extent.merged(c.extent[m])};
    picked.push_back(m);
    ++visited_;
    const double floor = groups_.group_cost_floor(next.extent);
    const size_t room = most - picked.size();
    const double more = c.prefix[std::min(n, m + 1 + room)] - c.prefix[m + 1];
    const bool trainings_fit = picked.size() < 2 || next.training <= next.limit;
    if (trainings_fit && floor - next.duals - more < -tolerance) {
      if (next.widest && floor - next.duals < -tolerance)
        try_column(c, picked, next.duals, tolerance, found);
      if (room > 0 && floor - next.duals - more_that_fit(c, m, room, next) < -tolerance)
        visit(c, m + 1, next, tolerance, picked, found);
    }
    picked.pop_back();
  }
}

double cover_bound::more_that_fit(const pricing_class& c, size_t m, size_t room,
                                  const partial& group) {
  // Every member a subtree adds must fit beside the group's trainings on its own (more only
  // add), and in dual order the first that fit are the highest.
  double sum = 0;
  for (size_t k = m + 1; k < c.jobs.size() && room > 0; ++k)
    if (group.training + c.training[k] <= std::min(group.limit, c.limit[k])) {
      sum += c.dual[k];
      --room;
    }
  return sum;
}

std::u16string cover_bound::key_of(const std::vector<int>& ordinals) {
  // One unit per ordinal under 2^15, two above (the first marked): exact, and short enough
  // for the string's inline buffer at the usual group sizes, so a lookup allocates nothing.
  std::u16string key;
  for (int o : ordinals) {
    const auto u = uint32_t(o);
    if (u < 0x8000u) {
      key.push_back(char16_t(u));
    } else {
      key.push_back(char16_t(0x8000u | (u >> 15)));
      key.push_back(char16_t(u & 0x7fffu));
    }
  }
  return key;
}

std::optional<double> cover_bound::group_cost(const pricing_class& c,
                                              const std::vector<size_t>& picked,
                                              std::vector<int>& ordinals) {
  ordinals.clear();
  for (size_t i : picked)
    ordinals.push_back(c.ordinal[i]);
  std::sort(ordinals.begin(), ordinals.end());
  auto key = key_of(ordinals);
  if (auto it = costs_.find(key); it != costs_.end())
    return it->second;
  std::vector<const rl_job*> members;
  for (size_t i : picked)
    members.push_back(c.jobs[i]);
  std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->id < b->id; });
  return costs_[std::move(key)] = groups_.group_cost(members);
}

void cover_bound::try_column(const pricing_class& c, const std::vector<size_t>& picked,
                             double duals, double tolerance, std::vector<column>& found) {
  ++priced_;
  std::vector<int> ordinals;
  auto cost = group_cost(c, picked, ordinals);
  if (cost && *cost - duals < -tolerance)
    found.push_back({std::move(ordinals), *cost});
}

std::vector<int> cover_bound::rows_of(const column& c, const std::vector<int>& row) {
  std::vector<int> rows;
  for (int o : c.members) {
    if (size_t(o) >= row.size() || row[size_t(o)] == 0)
      return {};
    rows.push_back(row[size_t(o)]);
  }
  return rows;
}

bool cover_bound::add_singles(const std::vector<const rl_job*>& active) {
  for (auto* j : active) {
    std::vector<int> alone{ordinal_of(j->id)};
    if (known_.contains(key_of(alone)))
      continue;
    auto c = groups_.group_cost({j});
    if (!c)
      return false;
    known_.insert(key_of(alone));
    columns_.push_back({alone, *c});
  }
  return true;
}

std::optional<double> cover_bound::cost_per_hour(const std::vector<rl_job>& jobs) {
  if (jobs.empty())
    return 0.0;
  std::vector<const rl_job*> active;
  std::vector<int> row; // each job's row (1-based), by ordinal; 0: not active
  for (auto& j : jobs) {
    active.push_back(&j);
    const auto o = size_t(ordinal_of(j.id));
    row.resize(std::max(row.size(), o + 1), 0);
    row[o] = int(active.size());
  }
  // Every job alone is a column, and must be one: the LP is feasible from the start.
  if (!add_singles(active))
    return std::nullopt;
  auto lp = cover_rows(active.size());
  for (auto& c : columns_)
    if (auto rows = rows_of(c, row); !rows.empty())
      add_column(lp.get(), rows, c.cost);
  return generate(lp.get(), active, row);
}

std::optional<double> cover_bound::generate(glp_prob* lp, const std::vector<const rl_job*>& active,
                                            const std::vector<int>& row) {
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  for (;;) {
    ++rounds_;
    if (glp_simplex(lp, &parm) != 0 || glp_get_status(lp) != GLP_OPT)
      return std::nullopt;
    const double value = glp_get_obj_val(lp);
    // The jobs in dual order, for the search's bound on what more members can add.
    std::vector<std::pair<double, size_t>> order;
    for (size_t i = 0; i < active.size(); ++i)
      order.emplace_back(-std::max(0.0, glp_get_row_dual(lp, int(i) + 1)), i);
    std::stable_sort(order.begin(), order.end(),
                     [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<const rl_job*> by_dual;
    std::vector<double> dual;
    for (auto [d, i] : order) {
      by_dual.push_back(active[i]);
      dual.push_back(-d);
    }
    std::vector<column> found;
    price(by_dual, dual, 1e-9 * std::max(1.0, value), found);
    size_t added = 0;
    for (auto& c : found) {
      if (!known_.insert(key_of(c.members)).second)
        continue; // priced out only by the tolerance
      add_column(lp, rows_of(c, row), c.cost);
      columns_.push_back(std::move(c));
      ++added;
    }
    if (added == 0)
      return value; // no feasible group prices below its duals: the LP over all of them
  }
}

} // namespace loom::replay
