#pragma once
// What the example processes share: whole-line output from any thread, and how they find the
// service and their keys.

#include <cstdio>
#include <mutex>
#include <string>

#include <CLI/CLI.hpp>

#include "loom/client.hpp"

namespace loom::example {

/// One whole line at a time: command callbacks print from the client's I/O thread.
template <class... Ts>
void say(const char* format, Ts... xs) {
  static std::mutex out;
  std::lock_guard<std::mutex> lock{out};
  std::printf(format, xs...);
  std::printf("\n");
  std::fflush(stdout);
}

/// --endpoint, --server-key and --key (`whose`: e.g. "This engine's").
inline void add_connection_options(CLI::App& app, client_options& c, std::string& server_key,
                                   std::string& key, const std::string& whose) {
  app.add_option("--endpoint", c.endpoint, "The service's gateway")->capture_default_str();
  app.add_option("--server-key", server_key, "The service's public key file (omit if insecure)");
  app.add_option("--key", key, whose + " key pair prefix (KEY.pub, KEY.secret)");
  app.add_option_function<double>(
    "--outage-limit-s",
    [&c](double s) { c.outage_limit = std::chrono::milliseconds{int64_t(s * 1000)}; },
    "Once registered, wait through a service outage at most this long (default: as long as "
    "it lasts)");
}

/// The CURVE keys the options name, unless the service runs insecure (no --server-key); false
/// (having said which file) when one is missing or not a key, so the example exits 2 with a
/// message instead of aborting in the socket's setup.
inline bool load_keys(client_options& c, const std::string& server_key, const std::string& key) {
  if (server_key.empty())
    return true;
  if (key.empty()) {
    std::fprintf(stderr, "--server-key needs --key: this client's key pair prefix\n");
    return false;
  }
  for (auto [field, path] : {std::pair{&c.server_public_key, server_key},
                             std::pair{&c.public_key, key + ".pub"},
                             std::pair{&c.secret_key, key + ".secret"}}) {
    *field = read_key(path);
    if (field->empty()) {
      std::fprintf(stderr, "%s: missing, unreadable or not a 40-character Z85 key "
                           "(`loom keygen` writes them)\n", path.c_str());
      return false;
    }
  }
  return true;
}

} // namespace loom::example
