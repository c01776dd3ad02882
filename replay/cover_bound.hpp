#pragma once
// A lower bound on the offline optimum (WEAVE §6.5) at any number of concurrent jobs: the LP
// relaxation of its set-cover formulation. Every feasible group is a column at its cheapest
// cost (offline_optimum::group_cost); the LP covers each active job at least once. Solved by
// column generation: GLPK's simplex on the columns found so far, then an exact pricing search
// over groups of up to the policy's max_group_size members for one costing less than its
// members' duals. When none does, the LP over every feasible group is solved, and its value
// bounds the integer optimum from below. Columns carry over from one active set to the next.

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "replay/offline_optimal.hpp"

struct glp_prob;

namespace loom::replay {

class cover_bound {
public:
  explicit cover_bound(offline_optimum& groups);

  /// $/hour no grouping of `jobs` (ids unique) can undercut; nothing if some job cannot be
  /// hosted even alone or the LP fails.
  std::optional<double> cost_per_hour(const std::vector<rl_job>& jobs);

  /// Pricing rounds run so far (each one LP solve and one search).
  int64_t rounds() const { return rounds_; }
  size_t columns() const { return columns_.size(); }
  /// Groups the pricing searches stepped through, and those among them it costed exactly.
  int64_t visited() const { return visited_; }
  int64_t priced() const { return priced_; }

private:
  struct column {
    std::vector<int> members; // job ordinals, ascending
    double cost = 0;
  };
  /// A job's number among every job seen (columns name their members by it).
  int ordinal_of(const std::string& id);
  /// A column's LP rows by `row` (rows by ordinal, 0: not active); none if a member is not.
  static std::vector<int> rows_of(const column& c, const std::vector<int>& row);
  /// Each active job alone as a column; false if one cannot be hosted alone.
  bool add_singles(const std::vector<const rl_job*>& active);
  /// Column generation on `lp` until no group prices below its duals; its value then.
  std::optional<double> generate(glp_prob* lp, const std::vector<const rl_job*>& active,
                                 const std::vector<int>& row);
  /// The exact search: every group (members from `jobs`, sorted by dual, descending) whose
  /// cost is below its members' duals by more than `tolerance`, appended to `found`.
  void price(const std::vector<const rl_job*>& jobs, const std::vector<double>& dual,
             double tolerance, std::vector<column>& found);
  /// The jobs a group whose training pool is `width` GPUs may hold, in dual order, with their
  /// training times there.
  struct pricing_class {
    int width = 0;
    std::vector<const rl_job*> jobs;
    std::vector<double> dual, training, limit, prefix; // limit: slo_limit_s; prefix: of dual
    std::vector<group_extent> extent;
    std::vector<int> ordinal;
  };
  /// What a partial group adds up to: its duals, trainings, tightest SLO limit, and whether a
  /// member is as wide as its class (a narrower group is priced in its own class).
  struct partial {
    double duals, training, limit;
    bool widest;
    group_extent extent;
  };
  void visit(const pricing_class& c, size_t from, const partial& sofar, double tolerance,
             std::vector<size_t>& picked, std::vector<column>& found);
  /// The most duals `room` more members after the `m`th can add to `group`.
  static double more_that_fit(const pricing_class& c, size_t m, size_t room,
                              const partial& group);
  /// Costs the picked jobs' group exactly; a column if it prices below their duals.
  void try_column(const pricing_class& c, const std::vector<size_t>& picked, double duals,
                  double tolerance, std::vector<column>& found);
  /// offline_optimum::group_cost through a cache by ordinals (`ordinals` gets them, sorted).
  std::optional<double> group_cost(const pricing_class& c, const std::vector<size_t>& picked,
                                   std::vector<int>& ordinals);

  /// A group's key: its sorted ordinals, packed.
  static std::u16string key_of(const std::vector<int>& ordinals);

  offline_optimum& groups_;
  std::unordered_map<std::string, int> ordinals_;
  std::vector<column> columns_;
  std::unordered_set<std::u16string> known_; // columns_' member lists
  std::unordered_map<std::u16string, std::optional<double>> costs_;
  int64_t rounds_ = 0;
  int64_t visited_ = 0;
  int64_t priced_ = 0;
};

} // namespace loom::replay
