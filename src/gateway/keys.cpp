#include "gateway/keys.hpp"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <sys/stat.h>
#include <zmq.h>

#include "protocol/error.hpp"

namespace loom {

caf::expected<curve_keypair> generate_keypair() {
  char pub[41] = {};
  char sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0)
    return make_error(errc::invalid_argument,
                      fmt::format("libzmq cannot make CURVE keys: {}", zmq_strerror(zmq_errno())));
  return curve_keypair{pub, sec};
}

caf::error write_keypair(const std::string& dir, const std::string& name, const curve_keypair& k) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return make_error(errc::invalid_argument, fmt::format("cannot create {}: {}", dir, ec.message()));
  auto base = std::filesystem::path{dir} / name;
  for (auto [ext, key, mode] : {std::tuple{".pub", &k.public_key, 0644},
                                std::tuple{".secret", &k.secret_key, 0600}}) {
    auto path = base.string() + ext;
    std::ofstream out(path, std::ios::trunc);
    out << *key << "\n";
    out.close();
    if (!out || ::chmod(path.c_str(), mode_t(mode)) != 0)
      return make_error(errc::invalid_argument, fmt::format("cannot write {}", path));
  }
  return {};
}

caf::expected<std::string> read_key_file(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  if (!in || !(in >> key))
    return make_error(errc::invalid_argument, fmt::format("cannot read key file {}", path));
  uint8_t raw[32];
  if (key.size() != 40 || !zmq_z85_decode(raw, key.c_str()))
    return make_error(errc::invalid_argument,
                      fmt::format("{} does not hold a Z85 CURVE key (40 characters)", path));
  return key;
}

caf::expected<curve_keypair> load_or_create_keypair(const std::string& dir, const std::string& name,
                                                    bool* created) {
  auto base = (std::filesystem::path{dir} / name).string();
  if (created)
    *created = false;
  if (!std::filesystem::exists(base + ".secret")) {
    auto k = generate_keypair();
    if (!k)
      return k.error();
    if (auto err = write_keypair(dir, name, *k))
      return err;
    if (created)
      *created = true;
    return k;
  }
  auto pub = read_key_file(base + ".pub");
  if (!pub)
    return pub.error();
  auto sec = read_key_file(base + ".secret");
  if (!sec)
    return sec.error();
  return curve_keypair{*pub, *sec};
}

} // namespace loom
