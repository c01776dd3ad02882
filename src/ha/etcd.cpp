#include "ha/etcd.hpp"

#include <chrono>
#include <mutex>

#include <curl/curl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "protocol/error.hpp"

namespace loom {

using json = nlohmann::json;

namespace {

// -- The JSON gateway's encoding: bytes as base64, int64 as decimal strings -------------------

constexpr char b64_alphabet[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string b64(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8
                 | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6)
      out += b64_alphabet[(v >> s) & 63];
  }
  if (i < in.size()) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (i + 1 < in.size())
      v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += b64_alphabet[(v >> 18) & 63];
    out += b64_alphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? b64_alphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string unb64(std::string_view in) {
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : in) {
    int d = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+' || c == '-' ? 62
            : c == '/' || c == '_' ? 63
                                   : -1;
    if (d < 0)
      continue; // padding
    v = (v << 6) | uint32_t(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((v >> bits) & 0xff);
    }
  }
  return out;
}

int64_t int_of(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end())
    return 0; // proto3 JSON leaves zeros out
  if (it->is_string())
    return std::stoll(it->get<std::string>());
  return it->is_number() ? it->get<int64_t>() : 0;
}

uint64_t uint_of(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end())
    return 0;
  if (it->is_string())
    return std::stoull(it->get<std::string>());
  return it->is_number() ? it->get<uint64_t>() : 0;
}

std::string bytes_of(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? unb64(it->get<std::string>()) : std::string{};
}

etcd_kv kv_of(const json& j) {
  etcd_kv kv;
  kv.key = bytes_of(j, "key");
  kv.value = bytes_of(j, "value");
  kv.create_revision = int_of(j, "create_revision");
  kv.mod_revision = int_of(j, "mod_revision");
  kv.lease = int_of(j, "lease");
  return kv;
}

std::vector<etcd_kv> kvs_of(const json& j) {
  std::vector<etcd_kv> out;
  if (auto it = j.find("kvs"); it != j.end())
    for (auto& kv : *it)
      out.push_back(kv_of(kv));
  return out;
}

int64_t revision_of(const json& j) {
  auto it = j.find("header");
  return it == j.end() ? 0 : int_of(*it, "revision");
}

json op_json(const etcd_op& op) {
  if (op.what == etcd_op::kind::put) {
    json put{{"key", b64(op.key)}, {"value", b64(op.value)}};
    if (op.lease)
      put["lease"] = std::to_string(op.lease);
    return {{"request_put", put}};
  }
  json del{{"key", b64(op.key)}};
  if (!op.range_end.empty())
    del["range_end"] = b64(op.range_end);
  return {{"request_delete_range", del}};
}

// -- libcurl ----------------------------------------------------------------------------------

void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

/// The options every request of ours has: POSTed JSON, bounded, TLS as configured, and TCP
/// keepalive so that a stream from a vanished peer ends instead of hanging.
void prepare(CURL* h, const etcd_options& o, const std::string& url, const std::string& body,
             curl_slist* headers) {
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, long(body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, long(o.request_timeout_ms));
  curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 2L);
  curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 1L);
  if (!o.tls.ca_file.empty())
    curl_easy_setopt(h, CURLOPT_CAINFO, o.tls.ca_file.c_str());
  if (!o.tls.cert_file.empty())
    curl_easy_setopt(h, CURLOPT_SSLCERT, o.tls.cert_file.c_str());
  if (!o.tls.key_file.empty())
    curl_easy_setopt(h, CURLOPT_SSLKEY, o.tls.key_file.c_str());
}

/// What etcd's error body says, as an errc: gRPC's UNAVAILABLE and DEADLINE_EXCEEDED (no
/// quorum, no leader, a timeout) are worth another endpoint.
struct server_error {
  errc code = errc::storage_failure;
  std::string message;
  bool try_next = false;
};

server_error server_error_of(long http, const std::string& body) {
  server_error e;
  auto j = json::parse(body, nullptr, false);
  int grpc = 2;
  if (j.is_object()) {
    e.message = j.value("message", j.value("error", std::string{}));
    grpc = j.value("code", 2);
  }
  if (e.message.empty())
    e.message = fmt::format("HTTP {}: {}", http, body.substr(0, 200));
  switch (grpc) {
    case 4:
    case 14: e.code = errc::unavailable, e.try_next = true; break;
    case 5: e.code = errc::not_found; break;
    case 3: e.code = errc::invalid_argument; break;
    case 8: e.code = errc::storage_full; break;
    case 11: e.code = errc::conflict; break;
    default: break;
  }
  return e;
}

} // namespace

class etcd_client::pool {
public:
  ~pool() {
    for (auto* h : free_)
      curl_easy_cleanup(h);
  }
  CURL* take() {
    std::lock_guard lock{mutex_};
    if (free_.empty())
      return curl_easy_init();
    auto* h = free_.back();
    free_.pop_back();
    return h;
  }
  void give(CURL* h) {
    std::lock_guard lock{mutex_};
    free_.push_back(h);
  }

private:
  std::mutex mutex_;
  std::vector<CURL*> free_;
};

etcd_client::etcd_client(etcd_options options)
  : options_(std::move(options)), pool_(std::make_unique<pool>()) {
  init_curl();
}

etcd_client::~etcd_client() = default;

caf::expected<std::string> etcd_client::call(const std::string& path, const std::string& body,
                                             bool* maybe_applied) {
  bool maybe = false;
  auto* h = pool_->take();
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  std::vector<std::string> tried;
  const size_t n = options_.endpoints.size();
  const size_t first = current_.load();
  caf::error last;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (first + k) % n;
    const auto& endpoint = options_.endpoints[i];
    std::string out;
    curl_easy_reset(h);
    prepare(h, options_, endpoint + path, body, headers);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, long(options_.request_timeout_ms));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    auto rc = curl_easy_perform(h);
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    if (rc == CURLE_OK && http == 200) {
      current_ = i;
      curl_slist_free_all(headers);
      pool_->give(h);
      return out;
    }
    if (rc != CURLE_OK) {
      curl_off_t sent = 0;
      curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &sent);
      maybe |= sent > 0; // the request reached a member before the link failed
      tried.push_back(fmt::format("{}: {}", endpoint, curl_easy_strerror(rc)));
      continue;
    }
    auto e = server_error_of(http, out);
    if (!e.try_next) { // etcd refused it: not applied
      curl_slist_free_all(headers);
      pool_->give(h);
      if (maybe_applied)
        *maybe_applied = maybe;
      return make_error(e.code, fmt::format("etcd {}: {}", endpoint, e.message));
    }
    // A member without a Raft leader proposes nothing; one that timed out may have.
    maybe |= e.message.find("no leader") == std::string::npos;
    tried.push_back(fmt::format("{}: {}", endpoint, e.message));
  }
  curl_slist_free_all(headers);
  pool_->give(h);
  if (maybe_applied)
    *maybe_applied = maybe;
  return make_error(errc::unavailable,
                    fmt::format("no etcd endpoint could do it ({})", fmt::join(tried, "; ")));
}

namespace {

caf::expected<json> parsed(const caf::expected<std::string>& body) {
  if (!body)
    return body.error();
  auto j = json::parse(*body, nullptr, false);
  if (j.is_discarded())
    return make_error(errc::storage_failure, "etcd answered with something not JSON");
  return j;
}

} // namespace

caf::expected<etcd_range_result> etcd_client::range(const std::string& key,
                                                   const std::string& range_end,
                                                   int64_t revision, int64_t limit) {
  json req{{"key", b64(key)}};
  if (!range_end.empty())
    req["range_end"] = b64(range_end);
  if (revision)
    req["revision"] = std::to_string(revision);
  if (limit)
    req["limit"] = std::to_string(limit);
  auto j = parsed(call("/v3/kv/range", req.dump()));
  if (!j)
    return j.error();
  etcd_range_result r;
  r.revision = revision_of(*j);
  r.kvs = kvs_of(*j);
  r.more = j->value("more", false);
  return r;
}

caf::expected<etcd_txn_result> etcd_client::txn(const std::vector<etcd_compare>& compares,
                                               const std::vector<etcd_op>& ops,
                                               bool* maybe_applied) {
  json cmp = json::array(), success = json::array(), failure = json::array();
  for (auto& c : compares)
    cmp.push_back({{"target", "CREATE"},
                   {"key", b64(c.key)},
                   {"create_revision", std::to_string(c.create_revision)},
                   {"result", "EQUAL"}});
  for (auto& op : ops)
    success.push_back(op_json(op));
  if (!compares.empty())
    failure.push_back({{"request_range", {{"key", b64(compares.front().key)}}}});
  json req{{"compare", cmp}, {"success", success}, {"failure", failure}};
  auto j = parsed(call("/v3/kv/txn", req.dump(), maybe_applied));
  if (!j)
    return j.error();
  etcd_txn_result r;
  r.revision = revision_of(*j);
  r.succeeded = j->value("succeeded", false);
  if (!r.succeeded)
    if (auto it = j->find("responses"); it != j->end())
      for (auto& resp : *it)
        if (auto rr = resp.find("response_range"); rr != resp.end())
          r.kvs = kvs_of(*rr);
  return r;
}

caf::expected<int64_t> etcd_client::grant(int64_t ttl_s) {
  auto j = parsed(call("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}.dump()));
  if (!j)
    return j.error();
  if (auto err = j->value("error", std::string{}); !err.empty())
    return make_error(errc::storage_failure, "etcd refused a lease: " + err);
  return int_of(*j, "ID");
}

caf::expected<int64_t> etcd_client::keep_alive(int64_t lease) {
  auto j = parsed(
    call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  if (!j)
    return j.error();
  // A streamed RPC: its one answer comes as {"result": ...}.
  auto it = j->find("result");
  return it == j->end() ? int64_t{0} : int_of(*it, "TTL");
}

caf::error etcd_client::revoke(int64_t lease) {
  auto r = call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  if (!r && code_of(r.error()) != errc::not_found)
    return r.error();
  return caf::none;
}

caf::error etcd_client::compact(int64_t revision) {
  auto r = call("/v3/kv/compaction", json{{"revision", std::to_string(revision)}}.dump());
  // Compacting to where someone compacted already is done.
  if (!r && code_of(r.error()) != errc::conflict)
    return r.error();
  return caf::none;
}

std::vector<etcd_member_status> etcd_client::status() {
  std::vector<etcd_member_status> out;
  for (auto& endpoint : options_.endpoints) {
    etcd_options one = options_;
    one.endpoints = {endpoint};
    etcd_client alone{one};
    etcd_member_status s;
    s.endpoint = endpoint;
    auto j = parsed(alone.call("/v3/maintenance/status", "{}"));
    if (!j) {
      s.error = message_of(j.error());
      out.push_back(std::move(s));
      continue;
    }
    auto header = j->value("header", json::object());
    s.member_id = uint_of(header, "member_id");
    s.revision = int_of(header, "revision");
    s.version = j->value("version", std::string{});
    s.db_size = int_of(*j, "dbSize");
    s.db_size_in_use = int_of(*j, "dbSizeInUse");
    s.leader = uint_of(*j, "leader");
    s.raft_index = int_of(*j, "raftIndex");
    if (auto errors = j->find("errors"); errors != j->end() && !errors->empty())
      s.error = errors->dump();
    s.healthy = s.leader != 0 && s.error.empty();
    if (s.leader == 0)
      s.error = "no Raft leader (no quorum)";
    out.push_back(std::move(s));
  }
  return out;
}

// -- The watch --------------------------------------------------------------------------------

etcd_watch::etcd_watch(etcd_options options, std::string key, std::string range_end,
                       int64_t start_revision, on_events events, on_end end)
  : options_(std::move(options)), key_(std::move(key)), range_end_(std::move(range_end)),
    next_revision_(start_revision), events_(std::move(events)), end_(std::move(end)) {
  init_curl();
  thread_ = std::thread([this] { run(); });
}

etcd_watch::~etcd_watch() {
  stop();
  if (thread_.joinable())
    thread_.join();
}

void etcd_watch::stop() {
  stop_ = true;
  std::lock_guard lock{mutex_};
  if (multi_)
    curl_multi_wakeup(static_cast<CURLM*>(multi_));
}

void etcd_watch::run() {
  // Watches started one after another begin at successive endpoints: a member that stopped
  // answering one does not get the next.
  static std::atomic<size_t> rounds{0};
  size_t i = rounds++;
  while (!stop_) {
    const auto& endpoint = options_.endpoints[i % options_.endpoints.size()];
    if (!stream(endpoint))
      break;
    if (stop_)
      break;
    ++i;
    // Every endpoint in turn, then a pause before the next round (etcd down altogether).
    if (i % options_.endpoints.size() == 0)
      for (int k = 0; k < 10 && !stop_; ++k)
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  // It ends only when stopped: by its owner, or by a compaction that left it nothing to say.
  if (!ending_.compacted)
    ending_ = {};
  if (end_)
    end_(ending_);
}

bool etcd_watch::stream(const std::string& endpoint) {
  json create{{"key", b64(key_)}, {"start_revision", std::to_string(next_revision_)}};
  if (!range_end_.empty())
    create["range_end"] = b64(range_end_);
  const std::string body = json{{"create_request", create}}.dump();
  CURL* h = curl_easy_init();
  CURLM* m = curl_multi_init();
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  // gRPC metadata through the gateway: a member without a Raft leader (cut off from its
  // quorum) ends the stream instead of keeping it open and silent.
  headers = curl_slist_append(headers, "Grpc-Metadata-hasleader: true");
  prepare(h, options_, endpoint + "/v3/watch", body, headers);
  buffer_.clear();
  auto on_data = +[](char* data, size_t size, size_t n, void* self) -> size_t {
    auto* w = static_cast<etcd_watch*>(self);
    w->buffer_.append(data, size * n);
    size_t nl;
    while ((nl = w->buffer_.find('\n')) != std::string::npos) {
      auto line = w->buffer_.substr(0, nl);
      w->buffer_.erase(0, nl + 1);
      auto j = json::parse(line, nullptr, false);
      if (!j.is_object())
        continue;
      if (auto err = j.find("error"); err != j.end()) {
        w->ending_.error = err->dump();
        return 0; // ends this stream: the next endpoint
      }
      auto result = j.value("result", json::object());
      if (int_of(result, "compact_revision") > 0) {
        w->ending_.compacted = true;
        w->ending_.error = fmt::format("revision {} was compacted (etcd keeps {} on)",
                                       w->next_revision_, int_of(result, "compact_revision"));
        w->stop_ = true;
        return 0;
      }
      std::vector<etcd_event> events;
      if (auto evs = result.find("events"); evs != result.end())
        for (auto& e : *evs) {
          etcd_event ev;
          ev.erased = e.value("type", std::string{}) == "DELETE";
          ev.kv = kv_of(e.value("kv", json::object()));
          w->next_revision_ = std::max(w->next_revision_, ev.kv.mod_revision + 1);
          events.push_back(std::move(ev));
        }
      const int64_t revision = revision_of(result);
      if (!events.empty() || revision)
        w->events_(std::move(events), revision);
    }
    return size * n;
  };
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, this);
  curl_multi_add_handle(m, h);
  {
    std::lock_guard lock{mutex_};
    multi_ = m;
  }
  int running = 1;
  while (running && !stop_) {
    if (curl_multi_perform(m, &running) != CURLM_OK)
      break;
    if (running)
      curl_multi_poll(m, nullptr, 0, 1000, nullptr);
  }
  {
    std::lock_guard lock{mutex_};
    multi_ = nullptr;
  }
  curl_multi_remove_handle(m, h);
  curl_multi_cleanup(m);
  curl_easy_cleanup(h);
  curl_slist_free_all(headers);
  return !stop_;
}

} // namespace loom
