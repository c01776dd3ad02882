#pragma once
// Real child processes for integration tests: spawn with captured stdout/stderr, read lines
// with a deadline (a guard against hangs, not a timing assertion), signal, and reap.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace loom::test {

/// `limit` times LOOM_TEST_TIME_SCALE (default 1): a sanitized, unoptimized build runs the
/// same processes several times slower (scripts/test --sanitize sets 4).
std::chrono::milliseconds scaled(std::chrono::milliseconds limit);

/// This test binary is built with AddressSanitizer (scripts/test --sanitize). There a test
/// repeats less what only the normal build's numbers can show (a report's bytes equal on a
/// second replay, a hundred kills rather than a few dozen): the sanitizers watch the memory of
/// one pass through the code, and the normal build runs the whole repetition.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool sanitized = true;
#elif defined(__has_feature)
inline constexpr bool sanitized = __has_feature(address_sanitizer);
#else
inline constexpr bool sanitized = false;
#endif

class child_process {
public:
  /// Starts argv[0] with the given arguments; stdout and stderr are captured by a thread of
  /// the test's own, so that a chatty child never blocks on a full pipe.
  explicit child_process(const std::vector<std::string>& argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }

  /// Returns the next stdout (or stderr) line not returned before that satisfies `pred`
  /// (lines before it are passed over), waiting for more; nothing at EOF or after `limit`.
  std::optional<std::string> read_until(bool from_stderr,
                                        const std::function<bool(const std::string&)>& pred,
                                        std::chrono::milliseconds limit);

  /// Waits until both streams are closed (the child and its children are gone).
  void drain(std::chrono::milliseconds limit);

  void send_signal(int sig);

  /// Waits for exit; returns the exit code, or 128 + signal if killed, or nothing on timeout.
  std::optional<int> wait(std::chrono::milliseconds limit);

  /// Every line so far.
  std::vector<std::string> stdout_lines() const;
  std::vector<std::string> stderr_lines() const;
  std::string stderr_text() const;

private:
  struct stream {
    int fd = -1;
    std::string buffer;
    std::vector<std::string> lines;
    size_t consumed = 0; // lines already passed by read_until
    bool open = true;
  };
  void read_streams();
  /// Takes what a read brought; false at EOF. Under the mutex.
  bool take(stream& s, const char* data, ssize_t n);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  int stop_fd_ = -1; // wakes the reader at destruction
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  stream out_;
  stream err_;
  std::thread reader_;
};

/// Runs a command to completion; returns exit code and captured output.
struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
};
run_result run(const std::vector<std::string>& argv,
               std::chrono::milliseconds limit = std::chrono::seconds{60});

/// A fresh directory under the system temp dir, removed with its contents at scope exit.
class temp_dir {
public:
  temp_dir();
  ~temp_dir();
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

private:
  std::filesystem::path path_;
};

/// Path of the built `loom` binary (from the LOOM_BIN environment variable set by meson).
std::string loom_binary();

/// Path of a file in the source tree (LOOM_SOURCE_ROOT set by meson).
std::string source_path(const std::string& relative);

void write_file(const std::string& path, const std::string& text);
/// Whether `p` wrote `text` to stderr, waiting up to `limit` for it: a line the service writes
/// as it answers may not be read from its pipe yet when the answer arrives.
bool logs(child_process& p, const std::string& text, std::chrono::milliseconds limit);
std::string read_file(const std::string& path);

/// A TCP port on 127.0.0.1 that was free a moment ago (for services that need one fixed in a
/// config file).
int free_tcp_port();

/// GET http://127.0.0.1:port/path; returns the whole response (status line, headers, body).
std::string http_get(int port, const std::string& path);

} // namespace loom::test
