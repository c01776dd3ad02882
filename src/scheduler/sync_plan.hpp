#pragma once
// WEAVE §5.2 topology-aware weight sync, as a route the workers follow: the new weights cross
// the cross-cluster link once, to one rollout node, and are then broadcast among the rollout
// nodes over the intra-cluster network; workers that share a node copy from that node's first
// worker. Pure: the gateway builds it from the sessions a job has, and the client libraries
// move the bytes along it (a data channel between workers, never through the control plane).

#include <string>
#include <vector>

namespace loom {

/// A worker that takes part in a job's sync: where its data channel is and on which node.
struct sync_peer {
  std::string worker;
  std::string node;
  std::string address;
};

/// One receiver of the weights and the data address it pulls them from.
struct sync_hop {
  std::string worker;
  std::string address;
  std::string source;
};

/// The route from the trainer at `source` to every rollout worker in `receivers`: the first
/// worker of each node (nodes ordered by name) forms a binary tree rooted at the trainer, so the
/// link is crossed once and each node forwards to at most two others; the node's other workers
/// pull from its first. Receivers without an address are left out (they sync some other way).
std::vector<sync_hop> sync_route(const std::string& source, std::vector<sync_peer> receivers);

} // namespace loom
