#include "drivers/tl1_client.hpp"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "drivers/asio.hpp"
#include "drivers/tl1_codec.hpp"
#include "protocol/error.hpp"

namespace loom {

namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

/// A command without its ctag: "VERB:TID:AID" and the fields after the ctag.
struct request {
  std::string head;
  std::string tail;
};

bool retryable(const caf::error& err) {
  if (err.category() != error_category())
    return false;
  auto code = static_cast<errc>(err.code());
  return code == errc::driver_timeout || code == errc::driver_unreachable
         || code == errc::driver_protocol;
}

caf::error deny_error(const tl1::reply& r, std::string_view what) {
  // PLNA on a command: the switch logged the session out (an idle timer, an operator): retried
  // after a new login. A refused login itself is final.
  auto code = r.code == tl1::code::login_required ? errc::driver_protocol
              : r.code == tl1::code::bad_login    ? errc::driver_auth
                                                  : errc::driver_denied;
  return make_error(code, fmt::format("{} denied: {} {}", what, r.code, r.reason));
}

std::optional<cross_connect> parse_patch(std::string_view line) {
  auto comma = line.find(',');
  if (comma == std::string_view::npos)
    return std::nullopt;
  cross_connect x;
  auto a = std::from_chars(line.data(), line.data() + comma, x.in);
  auto b = std::from_chars(line.data() + comma + 1, line.data() + line.size(), x.out);
  if (a.ec != std::errc{} || b.ec != std::errc{})
    return std::nullopt;
  return x;
}

} // namespace

struct tl1_client::impl {
  tl1_endpoint endpoint;
  tl1_client_options options;
  asio::io_context io;
  tcp::socket socket{io};
  tl1::reply_parser parser;
  std::array<char, 16384> buf{};
  uint64_t next_ctag = 1;
  bool up = false;
  std::set<std::string> equipment_alarms; // standing at the last RTRV-ALM-ALL

  /// Equipment alarms (a fan, a power supply) mask no port, but an operator must hear of
  /// them: once when one is raised and once when it clears, not at every health poll.
  void note_equipment_alarms(std::set<std::string> standing) {
    for (auto& line : standing)
      if (!equipment_alarms.count(line))
        spdlog::warn("event=tl1_equipment_alarm address={}:{} alarm=\"{}\"", endpoint.host,
                     endpoint.port, line);
    for (auto& line : equipment_alarms)
      if (!standing.count(line))
        spdlog::info("event=tl1_equipment_alarm_cleared address={}:{} alarm=\"{}\"",
                     endpoint.host, endpoint.port, line);
    equipment_alarms = std::move(standing);
  }

  /// Runs one asynchronous operation to completion or until the deadline.
  template <class Start>
  boost::system::error_code run_for(Start start, std::chrono::milliseconds limit) {
    boost::system::error_code result = asio::error::would_block;
    start([&](boost::system::error_code ec, auto&&...) { result = ec; });
    io.restart();
    io.run_for(limit);
    if (result == asio::error::would_block) {
      boost::system::error_code ignored;
      socket.cancel(ignored);
      io.restart();
      io.run(); // let the cancelled handler finish
      return asio::error::timed_out;
    }
    return result;
  }

  caf::error transport_error(boost::system::error_code ec, std::string_view what) {
    disconnect();
    if (ec == asio::error::timed_out)
      return make_error(errc::driver_timeout,
                        fmt::format("{}:{}: no answer to {} within {} ms", endpoint.host,
                                    endpoint.port, what, options.command_timeout.count()));
    return make_error(errc::driver_unreachable, fmt::format("{}:{}: {} failed: {}", endpoint.host,
                                                            endpoint.port, what, ec.message()));
  }

  void disconnect() {
    boost::system::error_code ignored;
    socket.close(ignored);
    parser = tl1::reply_parser{};
    up = false;
  }

  /// The next ctag: 1..999999, so it stays within GR-831's six characters however long the
  /// session lives.
  std::string take_ctag() {
    auto ctag = std::to_string(next_ctag);
    next_ctag = next_ctag % 999999 + 1;
    return ctag;
  }

  struct in_flight {
    size_t index = 0;
    std::chrono::steady_clock::time_point deadline;
  };

  /// The command whose deadline comes first.
  static const in_flight& oldest(const std::map<std::string, in_flight>& waiting) {
    return std::min_element(waiting.begin(), waiting.end(), [](auto& a, auto& b) {
             return a.second.deadline < b.second.deadline;
           })->second;
  }

  /// Sends the commands (at most `pipeline_window` unanswered at a time) and returns their
  /// replies in command order. Each reply must come within the command timeout of its command
  /// being sent: bytes that answer nothing (data lines, other ctags) do not extend it.
  caf::expected<std::vector<tl1::reply>> execute(const std::vector<request>& reqs) {
    using clock = std::chrono::steady_clock;
    std::vector<tl1::reply> replies(reqs.size());
    std::map<std::string, in_flight> waiting; // ctag -> command
    size_t sent = 0;
    size_t answered = 0;
    while (answered < reqs.size()) {
      std::string out;
      const auto deadline = clock::now() + options.command_timeout;
      while (sent < reqs.size() && waiting.size() < options.pipeline_window) {
        auto ctag = take_ctag();
        out += fmt::format("{}:{}:{};", reqs[sent].head, ctag, reqs[sent].tail);
        waiting[ctag] = {sent++, deadline};
      }
      if (!out.empty()) {
        auto ec = run_for(
          [&](auto handler) { asio::async_write(socket, asio::buffer(out), handler); },
          options.command_timeout);
        if (ec)
          return transport_error(ec, "sending " + reqs[answered].head);
      }
      const auto& first = oldest(waiting);
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(first.deadline
                                                                        - clock::now());
      size_t n = 0;
      boost::system::error_code ec = asio::error::timed_out;
      if (left.count() > 0)
        ec = run_for(
          [&](auto handler) {
            socket.async_read_some(asio::buffer(buf), [&n, handler](auto e, size_t got) mutable {
              n = got;
              handler(e, got);
            });
          },
          left);
      if (ec)
        return transport_error(ec, reqs[first.index].head);
      parser.feed(std::string_view{buf.data(), n});
      if (parser.failed()) {
        disconnect();
        return make_error(errc::driver_protocol,
                          fmt::format("{}:{}: reply beyond TL1's bounds: not a TL1 switch?",
                                      endpoint.host, endpoint.port));
      }
      while (auto r = parser.next()) {
        auto it = waiting.find(r->ctag);
        if (it == waiting.end()) {
          spdlog::debug("event=tl1_unexpected_reply ctag={}", r->ctag);
          continue;
        }
        replies[it->second.index] = std::move(*r);
        waiting.erase(it);
        ++answered;
      }
    }
    return replies;
  }

  caf::error connect() {
    disconnect();
    // A host name resolves at every connect, as check-config accepts it (a lab's DNS).
    boost::system::error_code ec;
    tcp::resolver resolver{io};
    auto found = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
    if (ec || found.empty())
      return make_error(errc::driver_unreachable,
                        fmt::format("{} does not resolve: {}", endpoint.host, ec.message()));
    ec = run_for([&](auto handler) { asio::async_connect(socket, found, handler); },
                 options.command_timeout);
    if (ec)
      return transport_error(ec, "connect");
    socket.set_option(tcp::no_delay(true), ec);
    auto login = execute({{fmt::format("ACT-USER::{}", endpoint.user), ":" + endpoint.password}});
    if (!login)
      return login.error();
    if (!login->front().completed) {
      auto err = deny_error(login->front(), "login");
      disconnect();
      return err;
    }
    up = true;
    spdlog::info("event=tl1_connected address={}:{} user={}", endpoint.host, endpoint.port,
                 endpoint.user);
    return caf::none;
  }

  /// Runs `op` (which may assume a logged-in session) with reconnects and backoff.
  template <class T, class Op>
  caf::expected<T> with_retries(Op op, std::string_view what) {
    caf::error last;
    auto backoff = options.backoff;
    for (int attempt = 1; attempt <= options.max_attempts; ++attempt) {
      if (attempt > 1) {
        // A change retried is worth a warning; a read (a health poll of a switch that is down,
        // every second) only at debug level: the poller reports the device down once.
        spdlog::log(std::string_view{what}.starts_with("RTRV") ? spdlog::level::debug
                                                               : spdlog::level::warn,
                    "event=tl1_retry op={} attempt={} error=\"{}\"", what, attempt, render(last));
        std::this_thread::sleep_for(backoff);
        backoff *= 2;
      }
      if (!up) {
        if (auto err = connect()) {
          if (!retryable(err))
            return err;
          last = std::move(err);
          continue;
        }
      }
      auto result = op(attempt);
      if (result || !retryable(result.error()))
        return result;
      // Whatever went wrong (a lost link, a session the switch logged out, bytes that are not
      // TL1), the next attempt starts from a fresh login.
      disconnect();
      last = std::move(result.error());
    }
    return last;
  }

  /// One retrieval, once: the completed reply's data lines, or why there are none.
  caf::expected<std::vector<std::string>> retrieve(request req, const char* name) {
    auto replies = execute({std::move(req)});
    if (!replies)
      return replies.error();
    auto& r = replies->front();
    if (!r.completed)
      return deny_error(r, name);
    return std::move(r.data);
  }

  caf::expected<std::vector<cross_connect>> list_once() {
    auto lines = retrieve({"RTRV-PATCH::", ""}, "RTRV-PATCH");
    if (!lines)
      return lines.error();
    std::vector<cross_connect> out;
    for (auto& line : *lines) {
      auto x = parse_patch(line);
      if (!x)
        return make_error(errc::driver_protocol, fmt::format("bad patch line '{}'", line));
      out.push_back(*x);
    }
    return out;
  }
};

tl1_client::tl1_client(tl1_endpoint endpoint, tl1_client_options options)
  : impl_(std::make_unique<impl>()) {
  impl_->endpoint = std::move(endpoint);
  impl_->options = options;
}

tl1_client::~tl1_client() = default;

bool tl1_client::connected() const {
  return impl_->up;
}

void tl1_client::disconnect() {
  impl_->disconnect();
}

caf::expected<std::vector<cross_connect>> tl1_client::list() {
  return impl_->with_retries<std::vector<cross_connect>>([&](int) { return impl_->list_once(); },
                                                         "RTRV-PATCH");
}

caf::expected<std::vector<uint32_t>> tl1_client::alarms() {
  return impl_->with_retries<std::vector<uint32_t>>(
    [&](int) -> caf::expected<std::vector<uint32_t>> {
      auto lines = impl_->retrieve({"RTRV-ALM-ALL::", ""}, "RTRV-ALM-ALL");
      if (!lines)
        return lines.error();
      std::vector<uint32_t> ports;
      std::set<std::string> equipment;
      for (auto& line : *lines)
        if (auto port = tl1::alarmed_port(line))
          ports.push_back(*port);
        else
          equipment.insert(line);
      impl_->note_equipment_alarms(std::move(equipment));
      return ports;
    },
    "RTRV-ALM-ALL");
}

caf::expected<switch_size> tl1_client::size() {
  return impl_->with_retries<switch_size>(
    [&](int) -> caf::expected<switch_size> {
      auto lines = impl_->retrieve({"RTRV-EQPT::SYSTEM", "::PARAMETER=SIZE"}, "RTRV-EQPT");
      if (!lines)
        return lines.error();
      for (auto& line : *lines) {
        auto pos = line.find("SIZE=");
        auto x = pos == std::string::npos ? std::string::npos : line.find('x', pos);
        if (x == std::string::npos)
          continue;
        switch_size s;
        auto a = std::from_chars(line.data() + pos + 5, line.data() + x, s.inputs);
        auto b = std::from_chars(line.data() + x + 1, line.data() + line.size(), s.outputs);
        if (a.ec != std::errc{} || b.ec != std::errc{})
          continue;
        if (s.inputs == 0 || s.outputs == 0 || s.inputs > max_switch_ports
            || s.outputs > max_switch_ports)
          return make_error(errc::driver_protocol,
                            fmt::format("the switch reports SIZE={}x{}: each side must be 1..{}",
                                        s.inputs, s.outputs, max_switch_ports));
        return s;
      }
      return make_error(errc::driver_protocol, "RTRV-EQPT answered no SIZE=NxM");
    },
    "RTRV-EQPT");
}

caf::expected<uint32_t> tl1_client::apply(const xc_diff& diff) {
  return impl_->with_retries<uint32_t>(
    [&](int attempt) -> caf::expected<uint32_t> {
      // A previous attempt may have been cut off after the switch acted: resume from what the
      // switch reports, so nothing is removed or added twice.
      xc_diff remaining;
      if (attempt == 1) {
        remaining = diff;
      } else {
        auto current = impl_->list_once();
        if (!current)
          return current.error();
        std::set<cross_connect> now{current->begin(), current->end()};
        std::copy_if(diff.removes.begin(), diff.removes.end(),
                     std::back_inserter(remaining.removes), [&](auto& x) { return now.count(x); });
        std::copy_if(diff.adds.begin(), diff.adds.end(), std::back_inserter(remaining.adds),
                     [&](auto& x) { return !now.count(x); });
      }
      std::vector<request> reqs;
      if (!remaining.removes.empty()) {
        std::vector<uint32_t> inputs;
        for (auto& x : remaining.removes)
          inputs.push_back(x.in);
        reqs.push_back({"DLT-PATCH::" + tl1::format_ports(std::move(inputs)), ""});
      }
      for (auto& x : remaining.adds)
        reqs.push_back({fmt::format("ENT-PATCH::{},{}", x.in, x.out), ""});
      auto replies = impl_->execute(reqs);
      if (!replies)
        return replies.error();
      for (size_t i = 0; i < replies->size(); ++i)
        if (!(*replies)[i].completed)
          return deny_error((*replies)[i], reqs[i].head);
      return static_cast<uint32_t>(attempt);
    },
    "apply");
}

} // namespace loom
