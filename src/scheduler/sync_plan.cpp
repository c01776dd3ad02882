#include "scheduler/sync_plan.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace loom {

std::vector<sync_hop> sync_route(const std::string& source, std::vector<sync_peer> receivers) {
  std::vector<sync_hop> out;
  if (source.empty())
    return out;
  std::erase_if(receivers, [](const sync_peer& p) { return p.address.empty(); });
  std::sort(receivers.begin(), receivers.end(), [](const sync_peer& a, const sync_peer& b) {
    return std::tie(a.node, a.worker) < std::tie(b.node, b.worker);
  });
  std::vector<const sync_peer*> heads; // the first worker of each node, in node order
  std::map<std::string, const sync_peer*> head_of;
  for (auto& p : receivers)
    if (head_of.emplace(p.node, &p).second)
      heads.push_back(&p);
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& parent = i == 0 ? source : heads[(i - 1) / 2]->address; // §5.2: one copy in
    out.push_back({heads[i]->worker, heads[i]->address, parent});
  }
  for (auto& p : receivers)
    if (head_of.at(p.node) != &p)
      out.push_back({p.worker, p.address, head_of.at(p.node)->address});
  return out;
}

} // namespace loom
