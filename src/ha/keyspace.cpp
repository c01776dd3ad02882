#include "ha/keyspace.hpp"

#include <map>

#include <fmt/format.h>

#include "loom.pb.h"
#include "records/codecs.hpp"

namespace loom {

std::string keyspace::replica(std::string_view name) const {
  return fmt::format("{}/replicas/{}", prefix_, name);
}

std::string keyspace::record(record_kind kind, std::string_view key) const {
  return fmt::format("{}/r/{}/{}", prefix_, to_string(kind), key);
}

std::string keyspace::event(uint64_t seq) const {
  return fmt::format("{}/e/{:016x}", prefix_, seq);
}

std::string range_end(std::string_view prefix) {
  std::string end{prefix};
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff)
    end.pop_back();
  if (end.empty())
    return std::string(1, '\0'); // every key (etcd's "\0" range end)
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

namespace {

/// What an op costs of a request: its key and value base64-encoded in JSON, and the framing.
size_t request_bytes(const etcd_op& op) {
  return (op.key.size() + op.value.size() + op.range_end.size()) * 4 / 3 + 96;
}

std::vector<etcd_op> ops_of(const keyspace& keys, const write_batch& b, uint64_t& seq) {
  std::vector<etcd_op> ops;
  for (auto& r : b.records) {
    if (r.empty_range())
      continue;
    etcd_op op;
    op.key = keys.record(r.kind, r.key);
    if (r.erase)
      op.what = etcd_op::kind::erase;
    else
      op.value = r.value;
    if (r.erase && !r.erase_to.empty())
      op.range_end = keys.record(r.kind, r.erase_to);
    ops.push_back(std::move(op));
  }
  for (auto& e : b.events) {
    etcd_op op;
    op.key = keys.event(++seq);
    op.value = e;
    ops.push_back(std::move(op));
  }
  return ops;
}

/// One transaction being filled. etcd refuses one that names a key twice or writes inside a
/// range it deletes ("duplicate key given in txn request"), but its writes land together, so
/// what a later write of the same key leaves is all that need be sent (every decision writes
/// the scheduler's counter, say): a write of a key replaces the earlier one, a range's
/// deletion drops the writes inside it. Only a write inside a range deleted before it cannot
/// be merged: that batch is the next transaction's.
class txn_builder {
public:
  /// Takes the ops, merged, if it can; unchanged and false if not.
  bool add(const std::vector<etcd_op>& ops, size_t bytes) {
    auto points = points_;
    auto ranges = ranges_;
    for (auto& op : ops) {
      if (inside_range(ranges, op.key, op.range_end.empty() ? op.key + '\0' : op.range_end))
        return false;
      if (op.range_end.empty()) {
        points[op.key] = op;
        continue;
      }
      points.erase(points.lower_bound(op.key), points.lower_bound(op.range_end));
      ranges.push_back(op);
    }
    points_ = std::move(points);
    ranges_ = std::move(ranges);
    bytes_ += bytes;
    return true;
  }

  size_t size() const { return points_.size() + ranges_.size(); }
  size_t bytes() const { return bytes_; }
  bool empty() const { return size() == 0; }

  std::vector<etcd_op> take() {
    std::vector<etcd_op> out;
    for (auto& op : ranges_)
      out.push_back(std::move(op));
    for (auto& [key, op] : points_)
      out.push_back(std::move(op));
    points_.clear();
    ranges_.clear();
    bytes_ = 0;
    return out;
  }

private:
  static bool inside_range(const std::vector<etcd_op>& ranges, const std::string& begin,
                           const std::string& end) {
    for (auto& r : ranges)
      if (begin < r.range_end && r.key < end)
        return true;
    return false;
  }

  std::map<std::string, etcd_op> points_;
  std::vector<etcd_op> ranges_;
  size_t bytes_ = 0;
};

/// The deletion of every event the retention no longer keeps once `last` is written, short of
/// `first` (the transaction's own events).
std::optional<etcd_op> retention_op(const keyspace& keys, uint64_t first, uint64_t last,
                                    uint64_t retention) {
  if (retention == 0 || last <= retention)
    return std::nullopt;
  etcd_op op;
  op.what = etcd_op::kind::erase;
  op.key = keys.event(0);
  op.range_end = keys.event(std::min(last - retention + 1, first));
  return op;
}

} // namespace

commit_plan plan_commit(const keyspace& keys, const std::vector<const write_batch*>& batches,
                        uint64_t first_seq, const txn_limits& limits, uint64_t event_retention) {
  commit_plan plan;
  uint64_t seq = first_seq - 1;
  uint64_t txn_first = first_seq; // the first event of the transaction being filled
  txn_builder txn;
  const size_t reserve_bytes = 256; // the leadership compare and the retention op
  auto close = [&](uint64_t last) {
    if (txn.empty())
      return;
    auto ops = txn.take();
    if (auto op = retention_op(keys, txn_first, last, event_retention))
      ops.push_back(std::move(*op));
    plan.txns.push_back(std::move(ops));
    txn_first = last + 1;
  };
  for (auto* batch : batches) {
    const uint64_t before = seq;
    auto ops = ops_of(keys, *batch, seq);
    size_t b = reserve_bytes;
    for (auto& op : ops)
      b += request_bytes(op);
    // One op is kept for the retention's deletion.
    const bool too_large = ops.size() + 1 > limits.max_ops || b > limits.max_bytes;
    txn_builder alone;
    if (too_large || !alone.add(ops, b)) {
      plan.txns.clear();
      plan.error = too_large
                     ? fmt::format("a decision of {} writes ({} bytes) is over one etcd "
                                   "transaction ([ha] max_txn_ops = {}, max_request_bytes = {})",
                                   ops.size(), b, limits.max_ops, limits.max_bytes)
                     : "a decision writes inside a range it deleted before: etcd takes no such "
                       "transaction";
      return plan;
    }
    if (txn.size() + ops.size() + 1 <= limits.max_ops && txn.bytes() + b <= limits.max_bytes
        && txn.add(ops, b))
      continue;
    close(before); // the retention of the transaction being closed ends at its own events
    txn.add(ops, b);
  }
  close(seq);
  return plan;
}

namespace {

/// A record key P/r/KIND/KEY as (kind, key); nothing for a kind this binary does not know.
std::optional<std::pair<record_kind, std::string>> record_of(std::string_view rest) {
  auto slash = rest.find('/');
  if (slash == std::string_view::npos)
    return std::nullopt;
  auto kind = parse_name<record_kind>(rest.substr(0, slash));
  if (!kind || *kind == record_kind::events)
    return std::nullopt;
  return std::pair{*kind, std::string{rest.substr(slash + 1)}};
}

std::optional<uint64_t> event_of(std::string_view hex) {
  if (hex.size() != 16)
    return std::nullopt;
  uint64_t seq = 0;
  for (char c : hex) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0)
      return std::nullopt;
    seq = seq * 16 + uint64_t(d);
  }
  return seq;
}

} // namespace

mirror_update mirror_writes(const keyspace& keys, const std::vector<etcd_event>& changes) {
  mirror_update out;
  const auto base = keys.all();
  write_batch current;
  uint64_t next_seq = 0;
  auto flush = [&] {
    if (current.records.empty() && current.events.empty())
      return;
    out.batches.push_back(std::move(current));
    current = write_batch{};
    current.sync = false;
  };
  current.sync = false;
  for (auto& c : changes) {
    std::string_view key{c.kv.key};
    if (key == keys.leader()) {
      out.leader = !c.erased;
      continue;
    }
    if (!key.starts_with(base))
      continue;
    auto rest = key.substr(base.size());
    if (rest.starts_with("replicas/"))
      continue;
    if (rest.starts_with("r/")) {
      auto rec = record_of(rest.substr(2));
      if (!rec) {
        out.error = fmt::format("etcd holds {}, a record of a kind this loom does not know (a "
                                "newer schema's leader?)",
                                key);
        return out;
      }
      current.records.push_back({rec->first, std::move(rec->second),
                                 c.erased ? std::string{} : c.kv.value, c.erased});
      continue;
    }
    if (rest.starts_with("e/")) {
      auto seq = event_of(rest.substr(2));
      if (!seq) {
        out.error = fmt::format("etcd holds {}, not an event key", key);
        return out;
      }
      if (c.erased)
        continue; // retention: the local log keeps it
      if (!current.events.empty() && *seq != next_seq)
        flush();
      if (current.events.empty())
        current.first_event_seq = *seq;
      current.events.push_back(c.kv.value);
      next_seq = *seq + 1;
    }
  }
  flush();
  return out;
}

std::string encode_replica(const replica_status& s) {
  v1::ReplicaStatus m;
  m.set_name(s.name);
  m.set_role(s.role == ha_role::leader ? v1::REPLICA_LEADER : v1::REPLICA_STANDBY);
  m.set_advertise(s.advertise);
  m.set_metrics(s.metrics);
  m.set_applied_revision(s.applied_revision);
  m.set_pid(s.pid);
  return m.SerializeAsString();
}

std::optional<replica_status> decode_replica(std::string_view bytes) {
  v1::ReplicaStatus m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return std::nullopt;
  replica_status s;
  s.name = m.name();
  s.role = m.role() == v1::REPLICA_LEADER ? ha_role::leader : ha_role::standby;
  s.advertise = m.advertise();
  s.metrics = m.metrics();
  s.applied_revision = m.applied_revision();
  s.pid = m.pid();
  return s;
}

} // namespace loom
