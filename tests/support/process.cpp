#include "tests/support/process.hpp"

#include "drivers/asio.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

namespace loom::test {

std::chrono::milliseconds scaled(std::chrono::milliseconds limit) {
  static const double scale = [] {
    auto* s = std::getenv("LOOM_TEST_TIME_SCALE");
    double v = s ? std::atof(s) : 1.0;
    return v >= 1 ? v : 1.0;
  }();
  return std::chrono::milliseconds{int64_t(double(limit.count()) * scale)};
}

namespace {

using clock_type = std::chrono::steady_clock;

std::string env_or_throw(const char* name) {
  const char* v = std::getenv(name);
  if (!v)
    throw std::runtime_error(std::string{name} + " is not set (run the tests via meson test)");
  return v;
}

} // namespace

child_process::child_process(const std::vector<std::string>& argv) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0)
    throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // Die with the test: a crashed test binary must not leave servers or emulators behind.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    // The child must not inherit a blocked signal mask from the test runner.
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
  close(out_pipe[1]);
  close(err_pipe[1]);
  out_.fd = out_pipe[0];
  err_.fd = err_pipe[0];
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  reader_ = std::thread([this] { read_streams(); });
}

child_process::~child_process() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
  uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(stop_fd_, &one, sizeof one);
  reader_.join();
  for (int fd : {out_.fd, err_.fd, stop_fd_})
    if (fd >= 0)
      close(fd);
}

bool child_process::take(stream& s, const char* data, ssize_t n) {
  if (n <= 0) {
    s.open = false;
    if (!s.buffer.empty()) {
      s.lines.push_back(std::move(s.buffer));
      s.buffer.clear();
    }
    return false;
  }
  s.buffer.append(data, static_cast<size_t>(n));
  size_t pos;
  while ((pos = s.buffer.find('\n')) != std::string::npos) {
    s.lines.push_back(s.buffer.substr(0, pos));
    s.buffer.erase(0, pos + 1);
  }
  return true;
}

void child_process::read_streams() {
  for (;;) {
    pollfd p[3] = {{out_.open ? out_.fd : -1, POLLIN, 0},
                   {err_.open ? err_.fd : -1, POLLIN, 0},
                   {stop_fd_, POLLIN, 0}};
    if (poll(p, 3, -1) < 0 && errno != EINTR)
      return;
    if (p[2].revents)
      return;
    char buf[8192];
    std::lock_guard<std::mutex> lock{mutex_};
    for (auto [i, s] : {std::pair{0, &out_}, std::pair{1, &err_}})
      if (p[i].revents)
        take(*s, buf, read(s->fd, buf, sizeof buf));
    changed_.notify_all();
    if (!out_.open && !err_.open)
      return;
  }
}

std::optional<std::string>
child_process::read_until(bool from_stderr, const std::function<bool(const std::string&)>& pred,
                          std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock{mutex_};
  auto& s = from_stderr ? err_ : out_;
  auto deadline = clock_type::now() + scaled(limit);
  for (;;) {
    while (s.consumed < s.lines.size()) {
      auto line = s.lines[s.consumed++];
      if (pred(line))
        return line;
    }
    if (!s.open || changed_.wait_until(lock, deadline) == std::cv_status::timeout)
      if (s.consumed >= s.lines.size())
        return std::nullopt;
  }
}

void child_process::drain(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock{mutex_};
  changed_.wait_for(lock, scaled(limit), [&] { return !out_.open && !err_.open; });
}

void child_process::send_signal(int sig) {
  ::kill(pid_, sig);
}

std::optional<int> child_process::wait(std::chrono::milliseconds limit) {
  auto deadline = clock_type::now() + scaled(limit);
  while (!reaped_) {
    auto r = waitpid(pid_, &status_, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      break;
    }
    if (clock_type::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  if (WIFEXITED(status_))
    return WEXITSTATUS(status_);
  return 128 + WTERMSIG(status_);
}

std::vector<std::string> child_process::stdout_lines() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return out_.lines;
}

std::vector<std::string> child_process::stderr_lines() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return err_.lines;
}

std::string child_process::stderr_text() const {
  std::lock_guard<std::mutex> lock{mutex_};
  std::string out;
  for (auto& l : err_.lines)
    out += l + "\n";
  return out + err_.buffer;
}

run_result run(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  child_process p{argv};
  p.drain(limit);
  run_result r;
  r.exit_code = p.wait(limit).value_or(-1);
  for (auto& l : p.stdout_lines())
    r.out += l + "\n";
  r.err = p.stderr_text();
  return r;
}

temp_dir::temp_dir() {
  std::random_device rd;
  auto base = std::filesystem::temp_directory_path();
  for (;;) {
    path_ = base / ("loom-test-" + std::to_string(rd()));
    if (std::filesystem::create_directory(path_))
      break;
  }
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string loom_binary() {
  return env_or_throw("LOOM_BIN");
}

std::string source_path(const std::string& relative) {
  return env_or_throw("LOOM_SOURCE_ROOT") + "/" + relative;
}

bool logs(child_process& p, const std::string& text, std::chrono::milliseconds limit) {
  auto has = [&](const std::string& l) { return l.find(text) != std::string::npos; };
  auto lines = p.stderr_lines();
  return std::any_of(lines.begin(), lines.end(), has)
         || p.read_until(true, has, limit).has_value();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << text;
}

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int free_tcp_port() {
  // Below the kernel's ephemeral range (32768 and up by default): a port-0 bind (serve's
  // metrics endpoint) or an outgoing connection is never given it before its user binds it.
  thread_local std::mt19937 rng{std::random_device{}()};
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = std::uniform_int_distribution<int>{20000, 32000}(rng);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(uint16_t(port));
    const bool free = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    if (fd >= 0)
      ::close(fd);
    if (free)
      return port;
  }
  throw std::runtime_error("no free TCP port");
}

std::string http_get(int port, const std::string& path) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ip::tcp::socket sock{io};
  sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  asio::write(sock, asio::buffer(req));
  std::string response;
  boost::system::error_code ec;
  asio::read(sock, asio::dynamic_buffer(response), ec);
  return response;
}

} // namespace loom::test
