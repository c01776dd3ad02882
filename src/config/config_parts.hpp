#pragma once
// What the config readers share (config.cpp: service, cluster, security, policy;
// config_fabric.cpp: the fabric); `loom ocs-agent` reads its switch's address and login
// with the same checks.

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/toml_reader.hpp"

namespace loom::config_parts {

/// A brace range such as "r{00..15}" expanded; an error at `key` and nothing if malformed.
std::vector<std::string> expand(table_reader& r, std::string_view key, const std::string& s);

bool parse_port(std::string_view s, int& port);

/// "host:port" with a port in [0, 65535] (0 = any free port).
bool valid_host_port(std::string_view s);

/// `path` relative to the config file's directory (absolute paths and in-memory configs as
/// written).
std::string resolve_path(const std::string& config_dir, const std::string& path);

/// A switch login from its file, or why not (`error` set).
struct login_file {
  std::string user, password, error;
};

/// A TL1 login: the first line that is not blank or a comment, USER:PASSWORD. Kept out of the
/// config so the config can be shared and the file kept private (0600).
login_file read_login_file(const std::string& path);

/// Remembers where each id was first defined, to name it in duplicate errors.
class id_registry {
public:
  explicit id_registry(std::string_view what) : what_(what) {}
  /// False (after reporting it) if the id is taken.
  bool add(table_reader& r, std::string_view key, const std::string& id);
  bool contains(const std::string& id) const { return first_line_.count(id) > 0; }

private:
  std::string_view what_;
  std::map<std::string, int> first_line_;
};

/// The [fabric] section: PoDs, ToRs, OCS devices and links, wired as RFabric §5.1 allows.
void read_fabric(table_reader& root, config& cfg, const id_registry& node_ids,
                 const std::string& config_dir);

/// The [ha] section (read after [endpoints] and [cluster], whose gateway and name it defaults
/// from); without it cfg.ha stays empty.
void read_ha(table_reader& root, config& cfg, const std::string& config_dir);

/// The [generation] section: its deployments, defaulted from [policy.planner] and
/// [policy.balancer] (read first).
/// `config_dir` resolves each deployment's `profile`.
void read_generation(table_reader& root, config& cfg, const std::string& config_dir);

} // namespace loom::config_parts
