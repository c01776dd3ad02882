#pragma once
// RocksDB's info log, sent to the service log instead of a LOG file in the database directory.
// A LOG file is one more writer that fails on a full disk, and RocksDB (Debian's build keeps
// its assertions) aborts on the next line it writes after that; it also grows without bound.

#include <memory>

namespace rocksdb {
class Logger;
}

namespace loom {

/// Warnings and errors only, one structured line each, the message cut at 512 bytes.
std::shared_ptr<rocksdb::Logger> rocks_log();

} // namespace loom
