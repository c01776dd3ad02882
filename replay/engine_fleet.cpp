#include "replay/engine_fleet.hpp"

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "protocol/error.hpp"

namespace loom::replay {

namespace {

/// The child's side of a fork: output to its log, the default signal mask, then the binary.
[[noreturn]] void become(const std::vector<std::string>& argv, const std::string& log) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

} // namespace

caf::expected<engine_fleet> engine_fleet::start(const std::vector<std::vector<std::string>>& argvs,
                                                const std::string& log_dir) {
  engine_fleet f;
  for (size_t i = 0; i < argvs.size(); ++i) {
    if (!std::filesystem::exists(argvs[i].front()))
      return make_error(errc::not_found,
                        fmt::format("engine binary {} does not exist", argvs[i].front()));
    auto log = (std::filesystem::path{log_dir} / fmt::format("engine-{}.log", i)).string();
    int pid = fork();
    if (pid < 0)
      return make_error(errc::invalid_argument, "fork failed");
    if (pid == 0)
      become(argvs[i], log);
    f.pids_.push_back(pid);
    f.codes_.push_back(-1);
  }
  return f;
}

engine_fleet::engine_fleet(engine_fleet&& other) noexcept
  : pids_(std::move(other.pids_)), codes_(std::move(other.codes_)) {
  other.pids_.clear();
}

engine_fleet::~engine_fleet() {
  if (!pids_.empty())
    stop();
}

size_t engine_fleet::exited() {
  size_t n = 0;
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (codes_[i] < 0 && waitpid(pids_[i], &status, WNOHANG) == pids_[i])
      codes_[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    n += codes_[i] >= 0 ? 1 : 0;
  }
  return n;
}

std::vector<int> engine_fleet::stop() {
  for (size_t i = 0; i < pids_.size(); ++i)
    if (codes_[i] < 0)
      ::kill(pids_[i], SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (exited() < pids_.size() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  for (size_t i = 0; i < pids_.size(); ++i)
    if (codes_[i] < 0) {
      ::kill(pids_[i], SIGKILL);
      int status = 0;
      waitpid(pids_[i], &status, 0);
      codes_[i] = 128 + SIGKILL;
    }
  auto codes = codes_;
  pids_.clear();
  return codes;
}

std::string default_engine_binary() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "loom-example-engine").string();
}

} // namespace loom::replay
