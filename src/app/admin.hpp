#pragma once
// The operator's side of `loom`: `keygen` writes CURVE key pairs, and `submit`, `jobs`,
// `groups`, `job`, `cancel`, `node`, `fabric`, `generation` talk to a running `serve` over the gateway with the
// admin key (human tables by default, JSON with --json).

#include <string>
#include <vector>

#include "config/config.hpp"

namespace loom {

struct admin_request {
  std::string command;     // submit | jobs | groups | job | cancel | node | fabric | generation
  std::string argument;    // the job file, job id, node id, (generation abort, reconfigure)
                           // deployment or (fabric end-opus) Opus job
  bool node_back = false;  // node: back in service (else out of service)
  std::string reason;      // node: why it is out; generation abort: why
  std::string layout;      // generation reconfigure: the parallel config to switch to
  bool json = false;
  std::string key;         // key pair path prefix (PREFIX.pub, PREFIX.secret); default: the
                           // service's local admin key in its keys_dir
  int timeout_ms = 10000;
  std::string endpoints;   // where to reach the service (comma-separated: its [ha] replicas);
                           // empty: the config's endpoints.gateway
};

/// The process exit code: 0, 1 when the service answers with an error or not at all, 2 for
/// bad input (a job file with errors).
int run_admin(const config& cfg, const admin_request& request);

/// `loom keygen NAME --out DIR [--force]`: an existing pair is kept unless forced (clients
/// configured with its public key would be locked out).
int run_keygen(const std::string& name, const std::string& dir, bool force);

/// Where the service keeps its keys: security.keys_dir, or STORAGE/keys.
std::string keys_dir(const config& cfg);

} // namespace loom
