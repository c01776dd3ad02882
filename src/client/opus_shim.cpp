#include "loom/opus_shim.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace loom {

bool opus_shim_policy::starts_phase(size_t k) const {
  const size_t n = digits_.size();
  return digits_[k] != digits_[(k + n - 1) % n];
}

bool opus_shim_policy::ends_phase(size_t k) const {
  const size_t n = digits_.size();
  return digits_[k] != digits_[(k + 1) % n];
}

bool opus_shim_policy::write_before(size_t k, bool served) const {
  if (!profiled())
    return true; // profiling: every collective writes
  // PP always writes, from both ends (Opus §4.2); on demand, so does a phase's first
  // collective (Alg. 1 line 10); anything the topology does not serve writes too.
  const bool asymmetrical = digits_[k] == 0;
  return asymmetrical || (mode_ == opus_shim_mode::on_demand && starts_phase(k)) || !served;
}

bool opus_shim_policy::write_after(size_t k) const {
  // Alg. 2 line 6: after a phase's last collective (or any PP one), provision the next.
  return profiled() && mode_ == opus_shim_mode::provisioning
         && (ends_phase(k) || digits_[k] == 0);
}

std::vector<uint32_t> phase_table(const v1::OpusRegistered& registered, uint32_t stage) {
  std::vector<uint32_t> digits;
  for (auto& p : registered.phases())
    if (p.stage() == stage) {
      if (digits.size() < p.last() + 1)
        digits.resize(p.last() + 1);
      for (uint32_t k = p.first(); k <= p.last(); ++k)
        digits[k] = p.digit();
    }
  return digits;
}

opus_stage_shim::opus_stage_shim(client& c, std::string job, uint32_t stage, opus_shim_mode mode,
                                 std::string topo)
  : client_(c), job_(std::move(job)), stage_(stage), policy_(mode), topo_(std::move(topo)) {}

opus_stage_shim::~opus_stage_shim() {
  await_provisioned();
}

std::string opus_stage_shim::topo() const {
  std::lock_guard<std::mutex> lock{mutex_};
  return topo_;
}

bool opus_stage_shim::served(const opus_op& op) const {
  std::lock_guard<std::mutex> lock{mutex_};
  // The stage's own digit changes only with writes it takes part in, so its last
  // acknowledgement tells; the giant ring serves every collective.
  return fallback_ || (stage_ < topo_.size() && uint32_t(topo_[stage_] - '0') == op.digit);
}

void opus_stage_shim::take_ack(const std::optional<v1::Envelope>& reply) {
  std::lock_guard<std::mutex> lock{mutex_};
  pending_ = false;
  if (reply && reply->has_topo_ack()) {
    topo_ = reply->topo_ack().topo();
    fallback_ = reply->topo_ack().fallback();
  } else {
    failed_ = true;
    error_ = reply && reply->has_error()
               ? call_error{int(reply->error().code()), reply->error().message()}
               : call_error{0, "no answer to a topo_write"};
  }
  answered_.notify_all();
}

namespace {

v1::Envelope topo_write_of(const std::string& job, uint32_t stage, const opus_op& op,
                           uint64_t index) {
  v1::Envelope e;
  auto* w = e.mutable_topo_write();
  w->set_job(job);
  w->set_group(op.group);
  w->set_op_index(index);
  w->set_group_size(op.group_size);
  w->set_stage(stage);
  w->set_digit(op.digit);
  return e;
}

/// The service did not take the write: it went away under it (the client answers
/// RESTART_ITERATION), its store is read-only, or it is stopping.
bool not_taken(const std::optional<v1::Envelope>& reply) {
  if (!reply || !reply->has_error())
    return false;
  auto code = reply->error().code();
  return code == v1::ERROR_RESTART_ITERATION || code == v1::ERROR_READ_ONLY
         || code == v1::ERROR_STOPPING;
}

constexpr auto first_pause = std::chrono::milliseconds{100};
constexpr auto longest_pause = std::chrono::seconds{2};

} // namespace

bool opus_stage_shim::write(const opus_op& op, uint64_t index) {
  ++writes_;
  return write_until_taken(op, index);
}

bool opus_stage_shim::write_until_taken(const opus_op& op, uint64_t index) {
  auto reply = client_.call(topo_write_of(job_, stage_, op, index), no_timeout);
  for (std::chrono::milliseconds pause = first_pause; not_taken(reply);
       pause = std::min<std::chrono::milliseconds>(pause * 2, longest_pause)) {
    std::this_thread::sleep_for(pause);
    reply = client_.call(topo_write_of(job_, stage_, op, index), no_timeout);
  }
  take_ack(reply);
  std::lock_guard<std::mutex> lock{mutex_};
  return !failed_;
}

void opus_stage_shim::provision(const opus_op& op, uint64_t index) {
  {
    std::lock_guard<std::mutex> lock{mutex_};
    pending_ = true;
    provisioned_ = std::make_pair(op.group, index);
  }
  ++writes_;
  client_.call_async(topo_write_of(job_, stage_, op, index),
                     [this, op, index](std::optional<v1::Envelope> reply) {
                       if (!not_taken(reply)) {
                         take_ack(reply);
                         return;
                       }
                       // On the client's I/O thread, which must not wait: the stage's own
                       // thread sends it again before its next collective.
                       std::lock_guard<std::mutex> lock{mutex_};
                       pending_ = false;
                       resend_ = std::make_pair(op, index);
                       answered_.notify_all();
                     });
}

bool opus_stage_shim::await_provisioned() {
  std::optional<std::pair<opus_op, uint64_t>> again;
  {
    std::unique_lock<std::mutex> lock{mutex_};
    answered_.wait(lock, [this] { return !pending_; });
    again = std::exchange(resend_, std::nullopt);
    if (!again)
      return !failed_;
  }
  return write_until_taken(again->first, again->second);
}

bool opus_stage_shim::pre_comm(const opus_op& op) {
  // The topology is locked while a provisioning write is unanswered (Alg. 1 line 2).
  if (!await_provisioned())
    return false;
  const uint64_t index = counts_[op.group]++;
  const size_t k = k_++;
  if (profiling_)
    schedule_.push_back(op);
  if (provisioned_ == std::make_pair(op.group, index)) {
    provisioned_.reset();
    return true; // written ahead, and acknowledged: the rails serve it
  }
  // A step longer than the profiled one is not in the phase table: such collectives write.
  const bool known = k < policy_.ops_per_step();
  if (known && !policy_.write_before(k, served(op)))
    return true;
  return write(op, index);
}

void opus_stage_shim::post_comm() {
  if (k_ == 0 || !policy_.profiled())
    return;
  const size_t k = k_ - 1;
  if (k >= schedule_.size() || !policy_.write_after(k))
    return;
  size_t next = k + 1;
  if (next == schedule_.size()) {
    if (last_)
      return; // no step follows
    next = 0;
  }
  const auto& op = schedule_[next];
  provision(op, counts_[op.group]);
}

void opus_stage_shim::end_step() {
  k_ = 0;
  profiling_ = false;
}

v1::OpusStageTrace opus_stage_shim::trace() const {
  v1::OpusStageTrace t;
  t.set_stage(stage_);
  for (auto& op : schedule_)
    t.add_digits(op.digit);
  return t;
}

bool opus_stage_shim::set_table(std::vector<uint32_t> digits) {
  if (digits.size() != schedule_.size())
    return false;
  for (size_t k = 0; k < digits.size(); ++k)
    if (digits[k] != schedule_[k].digit)
      return false;
  policy_.set_table(std::move(digits));
  return true;
}

} // namespace loom
