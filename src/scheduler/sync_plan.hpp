#pragma once
// WEAVE §5.2 topology-aware weight sync, as a route the workers follow: the new weights cross
// the cross-cluster link once, to one rollout node, and are then broadcast among the rollout
// nodes over the intra-cluster network; workers that share a node copy from that node's first
// worker. Where the fabric has PoDs, the route is OrchestrRL App. E's forest instead: one seed
// per PoD from the trainer over the core, then k-ary trees inside each PoD. Pure: the gateway
// builds it from the sessions a job has, and the client libraries move the bytes along it (a
// data channel between workers, never through the control plane).

#include <cstdint>
#include <map>
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

/// The fabric's PoD of each node that is in one (index into the fabric's PoDs); empty where the
/// service runs no fabric.
using pod_map = std::map<std::string, uint32_t>;

/// The route from the trainer `source` to every rollout worker in `receivers`. The first worker
/// of each node (nodes ordered by name) stands for its node; the node's other workers pull from
/// it. Nodes are grouped by PoD (those in none, and without a fabric all rollout nodes, share
/// one; the trainer's node in none is a PoD apart: the cross-cluster link). Each PoD the trainer
/// is not in gets one seed pulling from the trainer; the rest of the PoD hangs off its seed (or
/// the trainer, in its own PoD) in a binary tree. Without a fabric this is §5.2's route: the
/// link is crossed once and each node forwards to at most two others. Receivers without an
/// address are left out (they sync some other way).
std::vector<sync_hop> sync_route(const sync_peer& source, std::vector<sync_peer> receivers,
                                 const pod_map& pods = {});

} // namespace loom
