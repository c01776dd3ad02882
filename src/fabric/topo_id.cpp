#include "fabric/topo_id.hpp"

#include <algorithm>
#include <stdexcept>

namespace loom {

int opus_layout::ranks_per_stage() const {
  int n = 1;
  for (int d : symmetrical)
    n *= d;
  return n;
}

std::vector<int> opus_layout::coordinates(int rank_in_stage) const {
  std::vector<int> c(symmetrical.size());
  for (size_t i = symmetrical.size(); i-- > 0;) {
    c[i] = rank_in_stage % symmetrical[i];
    rank_in_stage /= symmetrical[i];
  }
  return c;
}

int opus_layout::rank_of(int stage, const std::vector<int>& coords) const {
  int r = 0;
  for (size_t i = 0; i < symmetrical.size(); ++i)
    r = r * symmetrical[i] + coords[i];
  return stage * ranks_per_stage() + r;
}

topo_id topo_id::uniform(int stages, uint8_t digit) {
  topo_id id;
  id.digits_.assign(size_t(stages), digit);
  return id;
}

topo_id topo_id::parse(const std::string& digits) {
  topo_id id;
  for (char c : digits) {
    if (c < '0' || c > '9')
      throw std::invalid_argument("topo_id digits are 0-9: " + digits);
    id.digits_.push_back(uint8_t(c - '0'));
  }
  return id;
}

std::string topo_id::str() const {
  std::string s;
  for (auto d : digits_)
    s += char('0' + d);
  return s;
}

uint64_t topo_id::value() const {
  uint64_t v = 0;
  for (auto d : digits_)
    v = v * 10 + d;
  return v;
}

int pp_peer(const topo_id& id, int stage) {
  if (id.digit(stage) != 0)
    return -1;
  // The contiguous run of PP stages around `stage` forms one ring.
  int first = stage;
  while (first > 0 && id.digit(first - 1) == 0)
    --first;
  int last = stage;
  while (last + 1 < id.stages() && id.digit(last + 1) == 0)
    ++last;
  if (first == last)
    return -1;
  return stage == last ? first : stage + 1;
}

std::vector<int> stages_to_reprogram(const topo_id& from, const topo_id& to) {
  // A stage's sub-mapping is the circuits from its own ports: it changes when the stage's
  // digit changes, or when it stays in PP but its ring successor changes.
  std::vector<int> out;
  for (int s = 0; s < from.stages(); ++s)
    if (from.digit(s) != to.digit(s) || (from.digit(s) == 0 && pp_peer(from, s) != pp_peer(to, s)))
      out.push_back(s);
  return out;
}

std::vector<cross_connect> submapping(const opus_layout& layout, const topo_id& id, int stage) {
  std::vector<cross_connect> out;
  const int per = layout.ranks_per_stage();
  const uint32_t r_total = uint32_t(layout.ranks());
  auto link = [&](int from_rank, int to_rank) {
    out.push_back({uint32_t(from_rank) + 1, r_total + uint32_t(to_rank) + 1});
  };
  const int digit = id.digit(stage);
  if (digit == 0) {
    int peer = pp_peer(id, stage);
    if (peer >= 0)
      for (int i = 0; i < per; ++i)
        link(stage * per + i, peer * per + i);
    return out;
  }
  const size_t dim = size_t(digit - 1);
  if (dim >= layout.symmetrical.size() || layout.symmetrical[dim] < 2)
    return out; // a dimension of size 1 has no ring
  for (int i = 0; i < per; ++i) {
    auto c = layout.coordinates(i);
    auto next = c;
    next[dim] = (c[dim] + 1) % layout.symmetrical[dim];
    link(layout.rank_of(stage, c), layout.rank_of(stage, next));
  }
  return out;
}

} // namespace loom
