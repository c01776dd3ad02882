#include "drivers/tl1_server.hpp"

#include <ctime>
#include <deque>
#include <memory>

#include <spdlog/spdlog.h>

#include "drivers/asio.hpp"

namespace loom {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct emulator_state {
  ocs_emulator_options options;
  tl1_switch sw;
  size_t sessions = 0;
  uint64_t changes = 0;
  bool dropped = false;

  explicit emulator_state(const ocs_emulator_options& o) : options(o), sw(o.switch_options) {}
};

std::pair<std::string, std::string> wall_date_time() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[16];
  char time[16];
  std::strftime(date, sizeof date, "%y-%m-%d", &tm);
  std::strftime(time, sizeof time, "%H:%M:%S", &tm);
  return {date, time};
}

class session : public std::enable_shared_from_this<session> {
public:
  session(tcp::socket socket, emulator_state& state, uint64_t id)
    : socket_(std::move(socket)),
      timer_(socket_.get_executor()),
      deadline_(socket_.get_executor()),
      ticker_(socket_.get_executor()),
      state_(state),
      splitter_(state.options.max_command_bytes),
      id_(id) {
    ++state_.sessions;
  }

  ~session() {
    --state_.sessions;
    spdlog::info("event=ocs_emu_session_closed session={} sessions={}", id_, state_.sessions);
  }

  void start() {
    arm_deadline();
    read();
    tick();
  }

private:
  /// The switch's own doings on this session (gr831 autonomous messages, the logout fault),
  /// at the finer of their two periods.
  void tick() {
    auto& o = state_.options;
    auto every = std::chrono::milliseconds::max();
    if (o.framing == tl1_framing::gr831 && o.autonomous_every.count() > 0)
      every = o.autonomous_every;
    if (o.logout_every.count() > 0)
      every = std::min(every, o.logout_every);
    if (every == std::chrono::milliseconds::max())
      return;
    ticker_.expires_after(every);
    ticker_.async_wait([self = shared_from_this(), every](auto ec) {
      if (ec || self->closed_)
        return;
      self->since_logout_ += every;
      auto& o = self->state_.options;
      if (o.logout_every.count() > 0 && self->since_logout_ >= o.logout_every) {
        self->since_logout_ = {};
        if (self->tl1_state_.logged_in) {
          self->tl1_state_ = {};
          spdlog::warn("event=ocs_emu_fault fault=logout session={}", self->id_);
        }
      }
      if (o.framing == tl1_framing::gr831 && o.autonomous_every.count() > 0
          && self->tl1_state_.logged_in) {
        auto [date, time] = wall_date_time();
        std::vector<std::string> alarms = self->state_.sw.options().equipment_alarms;
        if (alarms.empty())
          alarms.push_back("SYSTEM,EQPT:NA,HEARTBEAT,NSA");
        self->send(tl1::format_autonomous(o.switch_options.sid, date, time, ++self->atag_,
                                          "REPT ALM EQPT", alarms),
                   false);
      }
      self->tick();
    });
  }

  /// Writes `text` after whatever is being written; `then_process` takes the next command once
  /// it is out (a reply), an autonomous message does not.
  void send(std::string text, bool then_process) {
    outbox_.push_back({std::move(text), then_process});
    if (!writing_)
      write_next();
  }

  void write_next() {
    if (outbox_.empty() || closed_) {
      writing_ = false;
      return;
    }
    writing_ = true;
    auto out = std::make_shared<outgoing>(std::move(outbox_.front()));
    outbox_.pop_front();
    asio::async_write(socket_, asio::buffer(out->text),
                      [self = shared_from_this(), out](auto ec, size_t) {
                        if (ec)
                          return self->close();
                        if (out->then_process)
                          self->process();
                        self->write_next();
                      });
  }

  /// Closes the session at its deadline: the login timeout until it logs in, then the idle
  /// timeout after the last bytes it sent.
  void arm_deadline() {
    bool in = tl1_state_.logged_in;
    deadline_.expires_after(in ? state_.options.idle_timeout : state_.options.login_timeout);
    deadline_.async_wait([self = shared_from_this(), in](auto ec) {
      if (ec)
        return;
      spdlog::warn("event=ocs_emu_session_timeout session={} reason={}", self->id_,
                   in ? "idle" : "no_login");
      self->close();
    });
  }

  void read() {
    socket_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](auto ec, size_t n) {
      if (ec)
        return self->close();
      if (self->tl1_state_.logged_in)
        self->arm_deadline(); // before login, bytes do not extend the login timeout
      std::vector<tl1::command_splitter::item> items;
      self->splitter_.feed(std::string_view{self->buf_.data(), n}, items);
      if (!self->state_.options.hang)
        for (auto& it : items)
          self->pending_.push_back(std::move(it));
      if (!self->busy_)
        self->process();
      // Bounded: a client that pipelines without reading replies is paced by TCP, not memory.
      if (self->pending_.size() < 1024)
        self->read();
      else
        self->read_paused_ = true;
    });
  }

  void process() {
    if (closed_)
      return;
    if (pending_.empty()) {
      busy_ = false;
      if (read_paused_) {
        read_paused_ = false;
        read();
      }
      return;
    }
    busy_ = true;
    auto item = std::move(pending_.front());
    pending_.pop_front();
    if (item.overflow)
      return reply({"0", false, {}, std::string{tl1::code::invalid_syntax}, "command too long"});
    auto cmd = tl1::parse_command(item.text);
    if (!cmd)
      return reply({"0", false, {}, std::string{tl1::code::invalid_syntax},
                    "expected VERB:TID:AID:CTAG"});
    bool change = tl1_switch::mutates(*cmd);
    if (change && state_.options.delay.count() > 0) {
      if (state_.options.framing == tl1_framing::gr831) // it takes a while: say so first
        send(tl1::format_in_progress(cmd->ctag), false);
      timer_.expires_after(state_.options.delay);
      timer_.async_wait([self = shared_from_this(), c = std::move(*cmd)](auto ec) mutable {
        if (!ec)
          self->run(c, true);
      });
      return;
    }
    run(*cmd, change);
  }

  void run(const tl1::command& cmd, bool change) {
    bool was_in = tl1_state_.logged_in;
    auto r = state_.sw.execute(tl1_state_, cmd);
    if (tl1_state_.logged_in != was_in)
      arm_deadline();
    if (change && r.completed && state_.options.drop_after > 0 && !state_.dropped
        && ++state_.changes > state_.options.drop_after) {
      // The change is made but its answer is lost, the worst case for a client's retry.
      state_.dropped = true;
      spdlog::warn("event=ocs_emu_fault fault=drop session={} ctag={}", id_, cmd.ctag);
      return close();
    }
    reply(r);
  }

  void reply(const tl1::reply& r) {
    auto [date, time] = wall_date_time();
    const auto& o = state_.options;
    send(o.framing == tl1_framing::gr831
           ? tl1::format_reply_gr831(o.switch_options.sid, date, time, r, o.lines_per_message)
           : tl1::format_reply(o.switch_options.sid, date, time, r),
         true);
  }

  void close() {
    if (closed_)
      return;
    closed_ = true;
    boost::system::error_code ignored;
    timer_.cancel();
    deadline_.cancel();
    ticker_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  struct outgoing {
    std::string text;
    bool then_process = false;
  };

  tcp::socket socket_;
  asio::steady_timer timer_;
  asio::steady_timer deadline_;
  asio::steady_timer ticker_;
  std::deque<outgoing> outbox_;
  bool writing_ = false;
  std::chrono::milliseconds since_logout_{0};
  uint32_t atag_ = 0;
  emulator_state& state_;
  tl1::command_splitter splitter_;
  tl1_session tl1_state_;
  std::array<char, 4096> buf_{};
  std::deque<tl1::command_splitter::item> pending_;
  uint64_t id_;
  bool busy_ = false;
  bool read_paused_ = false;
  bool closed_ = false;
};

/// Accepts forever. A failed accept (out of file descriptors, a connection reset before it
/// was taken) is logged and tried again after a pause, so that one error never stops service.
void accept(tcp::acceptor& acceptor, asio::steady_timer& backoff, emulator_state& state,
            uint64_t& next_id) {
  acceptor.async_accept([&](auto ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted)
      return;
    if (ec) {
      spdlog::warn("event=ocs_emu_accept_failed error=\"{}\" retry_ms=100", ec.message());
      backoff.expires_after(std::chrono::milliseconds{100});
      backoff.async_wait([&](auto wait_ec) {
        if (!wait_ec)
          accept(acceptor, backoff, state, next_id);
      });
      return;
    }
    auto id = next_id++;
    if (state.sessions >= state.options.max_sessions) {
      spdlog::warn("event=ocs_emu_session_refused reason=max_sessions sessions={}",
                   state.sessions);
      boost::system::error_code ignored;
      socket.close(ignored);
    } else {
      socket.set_option(tcp::no_delay(true));
      spdlog::info("event=ocs_emu_session_opened session={} sessions={}", id,
                   state.sessions + 1);
      std::make_shared<session>(std::move(socket), state, id)->start();
    }
    accept(acceptor, backoff, state, next_id);
  });
}

} // namespace

int run_ocs_emulator(const ocs_emulator_options& options) {
  // Declared before the io_context: its destructor destroys pending handlers, whose sessions
  // still count themselves out of the state.
  emulator_state state{options};
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  boost::system::error_code ec;
  tcp::endpoint ep{asio::ip::make_address(options.bind, ec), options.port};
  if (ec) {
    spdlog::error("event=ocs_emu_failed error=\"invalid bind address {}\"", options.bind);
    return 2;
  }
  acceptor.open(ep.protocol(), ec);
  if (!ec)
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec)
    acceptor.bind(ep, ec);
  if (!ec)
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    spdlog::error("event=ocs_emu_failed address={}:{} error=\"{}\"", options.bind, options.port,
                  ec.message());
    return 1;
  }
  asio::signal_set signals{io, SIGINT, SIGTERM};
  signals.async_wait([&](auto, int sig) {
    spdlog::info("event=ocs_emu_stopping signal={}", sig);
    io.stop();
  });
  uint64_t next_id = 1;
  asio::steady_timer backoff{io};
  accept(acceptor, backoff, state, next_id);
  // Faults mid-run: the ports fail after the delay, or at SIGUSR1 if that comes first.
  asio::steady_timer failure{io};
  asio::signal_set fail_now{io};
  auto fail_ports = [&] {
    failure.cancel();
    fail_now.cancel();
    for (auto p : options.fail_later) {
      if (state.sw.options().failed_ports.count(p))
        continue;
      state.sw.fail_port(p);
      spdlog::warn("event=ocs_emu_port_failed port={}", p);
    }
  };
  if (!options.fail_later.empty()) {
    failure.expires_after(options.fail_after);
    failure.async_wait([&](auto ec) {
      if (!ec)
        fail_ports();
    });
    fail_now.add(SIGUSR1);
    fail_now.async_wait([&](auto ec, int) {
      if (!ec)
        fail_ports();
    });
  }
  spdlog::info("event=ocs_emu_listening address={} port={} size={}x{} delay_ms={} drop_after={} "
               "hang={} framing={}",
               options.bind, acceptor.local_endpoint().port(),
               options.switch_options.size.inputs, options.switch_options.size.outputs,
               options.delay.count(), options.drop_after, options.hang,
               options.framing == tl1_framing::gr831 ? "gr831" : "loom");
  io.run();
  return 0;
}

} // namespace loom
