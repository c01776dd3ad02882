// Test helper: writes an endless stream of job records through the store actor, each batch
// synced, and prints "ack N" only after the store has answered, i.e. after the write is durable.
// test_store kills it with SIGKILL mid-stream and checks that every acknowledged job survived.

#include <caf/all.hpp>
#include <cstdio>
#include <string>

#include "loom.pb.h"
#include "protocol/error.hpp"
#include "protocol/inspect.hpp"
#include "protocol/type_registry.hpp"
#include "store/store_actor.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: store_writer DB_PATH\n");
    return 2;
  }
  auto db = loom::database::open(argv[1]);
  if (!db) {
    std::fprintf(stderr, "%s\n", loom::render(db.error()).c_str());
    return 1;
  }
  caf::actor_system_config cfg;
  loom::register_loom_types(cfg);
  caf::actor_system sys{cfg};
  auto store = sys.spawn(loom::store, std::shared_ptr<loom::database>{std::move(*db)},
                         std::make_shared<loom::service_metrics>());
  caf::scoped_actor self{sys};
  for (uint64_t i = 0;; ++i) {
    loom::v1::Job job;
    job.set_id("job-" + std::to_string(i));
    job.set_name("durability probe");
    job.set_rollout_gpus(static_cast<uint32_t>(i % 64 + 1));
    job.set_state(loom::v1::JOB_STATE_PLACED);
    loom::v1::Event ev;
    ev.set_kind("job_placed");
    ev.set_subject(job.id());
    loom::write_batch batch;
    batch.records.push_back({loom::record_kind::jobs, job.id(), job.SerializeAsString(), false});
    batch.events.push_back(ev.SerializeAsString());
    batch.sync = true;
    bool ok = false;
    self->request(store, caf::infinite, loom::write_atom::value, std::move(batch))
      .receive([&](uint64_t) { ok = true; },
               [&](caf::error& err) { std::fprintf(stderr, "%s\n", loom::render(err).c_str()); });
    if (!ok)
      return 1;
    std::printf("ack %llu\n", static_cast<unsigned long long>(i));
    std::fflush(stdout);
  }
}
