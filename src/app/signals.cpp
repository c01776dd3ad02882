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

} // namespace loom
