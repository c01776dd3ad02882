#include "app/signals.hpp"

#include <csignal>
#include <pthread.h>

namespace loom {

namespace {

sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR1);
  return set;
}

} // namespace

void block_service_signals() {
  auto set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int await_service_signal() {
  auto set = shutdown_set();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

int await_service_signal(std::chrono::milliseconds timeout) {
  auto set = shutdown_set();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

} // namespace loom
