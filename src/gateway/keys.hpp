#pragma once
// CURVE key pairs as files: NAME.pub and NAME.secret in a directory, each one Z85 key (40
// characters) and a newline; the secret is readable by its owner only.

#include <string>

#include <caf/expected.hpp>

namespace loom {

struct curve_keypair {
  std::string public_key; // Z85
  std::string secret_key; // Z85
};

/// A fresh key pair (libzmq's zmq_curve_keypair).
caf::expected<curve_keypair> generate_keypair();

/// Writes DIR/NAME.pub and DIR/NAME.secret (mode 0600), creating DIR.
caf::error write_keypair(const std::string& dir, const std::string& name, const curve_keypair& k);

/// Reads a key file (either half); errors name the file.
caf::expected<std::string> read_key_file(const std::string& path);

/// DIR/NAME's pair, generated and written when absent.
caf::expected<curve_keypair> load_or_create_keypair(const std::string& dir, const std::string& name,
                                                    bool* created = nullptr);

} // namespace loom
