#pragma once
// A real etcd cluster on loopback (Debian's etcd-server 3.4) for the HA tests and benches:
// `size` members as child processes, each with its data in a temp dir, ready once every
// member answers.

#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

namespace loom::test {

class etcd_cluster {
public:
  /// `extra`: flags every member gets (e.g. --quota-backend-bytes).
  explicit etcd_cluster(int size = 1, std::vector<std::string> extra = {});
  ~etcd_cluster();
  etcd_cluster(const etcd_cluster&) = delete;
  etcd_cluster& operator=(const etcd_cluster&) = delete;

  /// Every member's client URL.
  const std::vector<std::string>& urls() const { return urls_; }
  const std::string& url() const { return urls_.front(); }

private:
  temp_dir dir_;
  std::vector<std::string> urls_;
  std::vector<std::unique_ptr<child_process>> members_;
};

} // namespace loom::test
