#include "drivers/tl1_switch.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

namespace loom {

namespace {

tl1::reply completed(const tl1::command& cmd, std::vector<std::string> data = {}) {
  return tl1::reply{cmd.ctag, true, std::move(data), {}, {}};
}

tl1::reply denied(const std::string& ctag, std::string_view code, std::string reason) {
  return tl1::reply{ctag, false, {}, std::string{code}, std::move(reason)};
}

std::string_view deny_code(xc_violation::kind k) {
  switch (k) {
    case xc_violation::kind::invalid_port: return tl1::code::invalid_port;
    case xc_violation::kind::masked_port: return tl1::code::operation_failed;
    case xc_violation::kind::duplicate_port: return tl1::code::invalid_port;
    case xc_violation::kind::port_in_use: return tl1::code::port_in_use;
    case xc_violation::kind::no_such_cross_connect: return tl1::code::not_connected;
  }
  return tl1::code::operation_failed;
}

} // namespace

tl1_switch::tl1_switch(tl1_switch_options options)
  : options_(std::move(options)), table_(options_.size, options_.failed_ports) {
  for (auto& x : options_.patches)
    if (xc_diff one{{}, {x}}; !table_.check(one))
      table_.apply(one);
}

bool tl1_switch::mutates(const tl1::command& cmd) {
  return cmd.verb == "ENT-PATCH" || cmd.verb == "DLT-PATCH";
}

tl1::reply tl1_switch::execute(tl1_session& session, const tl1::command& cmd) {
  if (!tl1::valid_ctag(cmd.ctag))
    return denied("0", tl1::code::invalid_ctag, fmt::format("invalid ctag '{}'", cmd.ctag));
  if (cmd.verb == "ACT-USER") {
    auto password = cmd.rest.size() >= 2 ? cmd.rest[1] : std::string{};
    if (cmd.aid != options_.user || password != options_.password)
      return denied(cmd.ctag, tl1::code::bad_login, "invalid user or password");
    session.logged_in = true;
    session.user = cmd.aid;
    return completed(cmd);
  }
  if (!session.logged_in)
    return denied(cmd.ctag, tl1::code::login_required, "not logged in");
  if (cmd.verb == "CANC-USER") {
    session = {};
    return completed(cmd);
  }
  if (cmd.verb == "ENT-PATCH")
    return ent_patch(cmd);
  if (cmd.verb == "DLT-PATCH")
    return dlt_patch(cmd);
  if (cmd.verb == "RTRV-PATCH")
    return rtrv_patch(cmd);
  if (cmd.verb == "RTRV-PORT-POWER")
    return rtrv_port_power(cmd);
  if (cmd.verb == "RTRV-ALM-ALL")
    return rtrv_alm_all(cmd);
  if (cmd.verb == "RTRV-NETYPE")
    return completed(cmd, {fmt::format("LOOM,OCS-EMU-{}x{},OCS,{}", options_.size.inputs,
                                       options_.size.outputs, LOOM_VERSION)});
  if (auto r = port_state(cmd))
    return *r;
  if (cmd.verb == "RTRV-EQPT") {
    bool size = cmd.aid == "SYSTEM"
                && std::find(cmd.rest.begin(), cmd.rest.end(), "PARAMETER=SIZE") != cmd.rest.end();
    if (!size)
      return denied(cmd.ctag, tl1::code::invalid_syntax, "only SYSTEM PARAMETER=SIZE is supported");
    return completed(cmd, {fmt::format("SYSTEM:SIZE={}x{}", options_.size.inputs,
                                       options_.size.outputs)});
  }
  return denied(cmd.ctag, tl1::code::invalid_command, fmt::format("unknown command {}", cmd.verb));
}

tl1::reply tl1_switch::ent_patch(const tl1::command& cmd) {
  // <ins>,<outs>: single ports or equally long lists, paired in order.
  auto comma = cmd.aid.find(',');
  if (comma == std::string::npos)
    return denied(cmd.ctag, tl1::code::invalid_syntax, "expected <in>,<out>");
  auto ins = tl1::parse_ports(std::string_view{cmd.aid}.substr(0, comma));
  auto outs = tl1::parse_ports(std::string_view{cmd.aid}.substr(comma + 1));
  if (auto* e = std::get_if<std::string>(&ins))
    return denied(cmd.ctag, tl1::code::invalid_port, *e);
  if (auto* e = std::get_if<std::string>(&outs))
    return denied(cmd.ctag, tl1::code::invalid_port, *e);
  auto& in = std::get<std::vector<uint32_t>>(ins);
  auto& out = std::get<std::vector<uint32_t>>(outs);
  if (in.size() != out.size())
    return denied(cmd.ctag, tl1::code::invalid_syntax, "input and output lists differ in length");
  xc_diff diff;
  for (size_t i = 0; i < in.size(); ++i)
    diff.adds.push_back({in[i], out[i]});
  if (auto v = table_.check(diff))
    return denied(cmd.ctag, deny_code(v->what), v->message);
  table_.apply(diff);
  return completed(cmd);
}

tl1::reply tl1_switch::dlt_patch(const tl1::command& cmd) {
  xc_diff diff;
  if (cmd.aid == "ALL") {
    diff.removes = table_.list();
  } else {
    auto ports = tl1::parse_ports(cmd.aid);
    if (auto* e = std::get_if<std::string>(&ports))
      return denied(cmd.ctag, tl1::code::invalid_port, *e);
    std::set<uint32_t> seen;
    for (auto p : std::get<std::vector<uint32_t>>(ports)) {
      std::optional<cross_connect> xc;
      if (table_.is_input(p)) {
        if (auto o = table_.output_of(p))
          xc = cross_connect{p, *o};
      } else if (table_.is_output(p)) {
        if (auto i = table_.input_of(p))
          xc = cross_connect{*i, p};
      } else {
        return denied(cmd.ctag, tl1::code::invalid_port, fmt::format("port {} does not exist", p));
      }
      if (!xc)
        return denied(cmd.ctag, tl1::code::not_connected,
                      fmt::format("port {} has no cross-connect", p));
      if (seen.insert(xc->in).second)
        diff.removes.push_back(*xc);
    }
  }
  table_.apply(diff);
  return completed(cmd);
}

tl1::reply tl1_switch::rtrv_patch(const tl1::command& cmd) {
  std::vector<std::string> data;
  if (cmd.aid.empty() || cmd.aid == "ALL") {
    for (auto& x : table_.list())
      data.push_back(fmt::format("{},{}", x.in, x.out));
    return completed(cmd, std::move(data));
  }
  auto ports = tl1::parse_ports(cmd.aid);
  if (auto* e = std::get_if<std::string>(&ports))
    return denied(cmd.ctag, tl1::code::invalid_port, *e);
  for (auto p : std::get<std::vector<uint32_t>>(ports)) {
    if (auto o = table_.output_of(p))
      data.push_back(fmt::format("{},{}", p, *o));
    else if (auto i = table_.input_of(p))
      data.push_back(fmt::format("{},{}", *i, p));
  }
  return completed(cmd, std::move(data));
}

tl1::reply tl1_switch::rtrv_port_power(const tl1::command& cmd) {
  auto ports = tl1::parse_ports(cmd.aid);
  if (auto* e = std::get_if<std::string>(&ports))
    return denied(cmd.ctag, tl1::code::invalid_port, *e);
  std::vector<std::string> data;
  for (auto p : std::get<std::vector<uint32_t>>(ports)) {
    if (!table_.is_input(p) && !table_.is_output(p))
      return denied(cmd.ctag, tl1::code::invalid_port, fmt::format("port {} does not exist", p));
    // A lit, patched port reads a few dB of insertion loss; a dark one the detector floor.
    bool lit = table_.output_of(p) || table_.input_of(p);
    bool failed = options_.failed_ports.count(p) > 0;
    double dbm = failed || !lit ? -60.0 : -1.5 - 0.01 * (p % 100);
    data.push_back(fmt::format("{}:{:.2f}", p, dbm));
  }
  return completed(cmd, std::move(data));
}

void tl1_switch::fail_port(uint32_t port) {
  options_.failed_ports.insert(port);
  table_.mask(port);
}

tl1::reply tl1_switch::rtrv_alm_all(const tl1::command& cmd) {
  std::vector<std::string> data;
  for (auto p : options_.failed_ports) // major, loss of signal, service-affecting
    data.push_back(options_.gr833_alarms ? fmt::format("{},PORT:MJ,LOS,SA", p)
                                         : fmt::format("{}:MJ,LOS,SA", p));
  data.insert(data.end(), options_.equipment_alarms.begin(), options_.equipment_alarms.end());
  return completed(cmd, std::move(data));
}

std::optional<tl1::reply> tl1_switch::port_state(const tl1::command& cmd) {
  if (cmd.verb == "RTRV-HDR")
    return completed(cmd);
  if (cmd.verb == "RTRV-INV")
    return completed(cmd, {fmt::format("SYSTEM:VENDOR=LOOM,MODEL=OCS-EMU-{}x{},SW={}",
                                       options_.size.inputs, options_.size.outputs,
                                       LOOM_VERSION)});
  static const std::set<std::string> verbs{
    "RTRV-PORT-SHUTTER", "OPR-PORT-SHUTTER", "RLS-PORT-SHUTTER", "RTRV-PORT-LABEL",
    "SET-PORT-LABEL",    "RTRV-PORT-ATTEN",  "SET-PORT-ATTEN"};
  if (!verbs.count(cmd.verb))
    return std::nullopt;
  auto parsed = tl1::parse_ports(cmd.aid);
  if (auto* e = std::get_if<std::string>(&parsed))
    return denied(cmd.ctag, tl1::code::invalid_port, *e);
  auto ports = std::get<std::vector<uint32_t>>(parsed);
  for (auto p : ports)
    if (!table_.is_input(p) && !table_.is_output(p))
      return denied(cmd.ctag, tl1::code::invalid_port, fmt::format("port {} does not exist", p));
  // SET-PORT-LABEL:...:<ports>:<ctag>::<label>; SET-PORT-ATTEN:...:<ports>:<ctag>::<dB>.
  const std::string value = cmd.rest.size() >= 2 ? cmd.rest[1] : std::string{};
  double db = 0;
  if (cmd.verb == "SET-PORT-ATTEN") {
    char* end = nullptr;
    db = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || db < 0 || db > 30)
      return denied(cmd.ctag, tl1::code::invalid_syntax, "attenuation is 0..30 dB");
  }
  std::vector<std::string> data;
  for (auto p : ports) {
    if (cmd.verb == "OPR-PORT-SHUTTER")
      shut_.insert(p);
    else if (cmd.verb == "RLS-PORT-SHUTTER")
      shut_.erase(p);
    else if (cmd.verb == "SET-PORT-LABEL")
      labels_[p] = value;
    else if (cmd.verb == "SET-PORT-ATTEN")
      atten_db_[p] = db;
    else if (cmd.verb == "RTRV-PORT-SHUTTER")
      data.push_back(fmt::format("{}:{}", p, shut_.count(p) ? "CLOSED" : "OPEN"));
    else if (cmd.verb == "RTRV-PORT-LABEL")
      data.push_back(fmt::format("{}:{}", p, labels_.count(p) ? labels_.at(p) : ""));
    else
      data.push_back(fmt::format("{}:{:.2f}", p, atten_db_.count(p) ? atten_db_.at(p) : 0.0));
  }
  return completed(cmd, std::move(data));
}

} // namespace loom
