#include "store/ack_mark.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "protocol/error.hpp"

namespace loom {

namespace {

constexpr const char* file_name = "LOOM-ACKED";
// Fixed width, rewritten in place: one sector, so a crash leaves the old or the new mark.
constexpr size_t mark_size = 32;

std::string mark_path(const std::string& dir) {
  return dir + "/" + file_name;
}

caf::error io_error(const std::string& what, const std::string& path, int err) {
  auto code = err == ENOSPC || err == EDQUOT ? errc::storage_full
              : err == EROFS || err == EACCES ? errc::storage_read_only
                                              : errc::storage_failure;
  return make_error(code, fmt::format("cannot {} {}: {}", what, path, std::strerror(err)));
}

} // namespace

ack_mark::~ack_mark() {
  if (fd_ >= 0)
    ::close(fd_);
}

caf::expected<uint64_t> ack_mark::read(const std::string& dir) {
  auto path = mark_path(dir);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? caf::expected<uint64_t>{uint64_t{0}}
                           : caf::expected<uint64_t>{io_error("read", path, errno)};
  char buf[mark_size];
  auto n = ::pread(fd, buf, sizeof buf, 0);
  int read_errno = errno;
  ::close(fd);
  if (n < 0)
    return io_error("read", path, read_errno);
  std::string_view text{buf, size_t(n)};
  constexpr std::string_view tag = "acked ";
  uint64_t seq = 0;
  if (n == 0)
    return seq; // created, never written: a crash between open and the first mark
  if (text.substr(0, tag.size()) == tag) {
    auto digits = text.substr(tag.size());
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seq);
    if (ec == std::errc{} && end != digits.data() && *end == '\n')
      return seq;
  }
  return make_error(errc::storage_corrupted,
                    fmt::format("{} is unreadable; `loom serve --salvage` rewrites it", path));
}

caf::error ack_mark::open(const std::string& dir) {
  path_ = mark_path(dir);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return io_error("open", path_, errno);
  return {};
}

caf::error ack_mark::write(uint64_t seq, bool sync) {
  if (seq == written_ && (!sync || unsynced_ == 0))
    return {};
  char buf[mark_size];
  std::memset(buf, ' ', sizeof buf);
  auto text = fmt::format("acked {}\n", seq);
  std::memcpy(buf, text.data(), text.size());
  auto written = ::pwrite(fd_, buf, sizeof buf, 0);
  if (written != ssize_t(sizeof buf))
    return io_error("write", path_, written < 0 ? errno : ENOSPC);
  written_ = seq;
  if (!sync && ++unsynced_ < sync_every)
    return {};
  if (::fdatasync(fd_) != 0)
    return io_error("sync", path_, errno);
  unsynced_ = 0;
  return {};
}

} // namespace loom
