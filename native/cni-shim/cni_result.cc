// Upstream's pass-through result, in C++; see cni_result.h and lib/cni/result.ts.
#include "cni-shim/cni_result.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cni-shim/json.h"

namespace podwire::cni {

namespace {

using Kind = JsonValue::Kind;
using Bytes = std::array<uint8_t, 16>;

// ---------------------------------------------------------------- addresses (Go's net/netip)

bool ParseIPv4(std::string_view s, uint8_t out[4]) {
  int part = 0;
  size_t i = 0;
  while (part < 4) {
    size_t start = i;
    unsigned v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3) v = v * 10 + static_cast<unsigned>(s[i++] - '0');
    size_t len = i - start;
    if (len == 0 || v > 255 || (len > 1 && s[start] == '0')) return false;
    out[part++] = static_cast<uint8_t>(v);
    if (part < 4) {
      if (i >= s.size() || s[i] != '.') return false;
      ++i;
    }
  }
  return i == s.size();
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ParseIPv6(std::string_view s, Bytes* b) {
  size_t n = 0;  // bytes filled
  int ellipsis = -1;
  size_t i = 0;
  if (s.substr(0, 2) == "::") {
    ellipsis = 0;
    i = 2;
    if (i == s.size()) {
      b->fill(0);
      return true;
    }
  }
  while (n < 16) {
    size_t start = i;
    unsigned v = 0;
    while (i < s.size() && i - start < 4 && HexDigit(s[i]) >= 0) v = (v << 4) | static_cast<unsigned>(HexDigit(s[i++]));
    if (i == start) return false;
    if (i < s.size() && s[i] == '.') {  // embedded IPv4 in the last 32 bits
      if (n + 4 > 16) return false;
      if (!ParseIPv4(s.substr(start), b->data() + n)) return false;
      n += 4;
      i = s.size();
      break;
    }
    (*b)[n++] = static_cast<uint8_t>(v >> 8);
    (*b)[n++] = static_cast<uint8_t>(v & 0xFF);
    if (i == s.size()) break;
    if (s[i] != ':' || i + 1 == s.size()) return false;
    ++i;
    if (s[i] == ':') {
      if (ellipsis >= 0) return false;
      ellipsis = static_cast<int>(n);
      ++i;
      if (i == s.size()) break;
    }
  }
  if (i != s.size()) return false;
  if (n < 16) {
    if (ellipsis < 0) return false;
    size_t e = static_cast<size_t>(ellipsis);
    size_t gap = 16 - n;
    for (size_t k = n; k-- > e;) (*b)[k + gap] = (*b)[k];
    for (size_t k = e; k < e + gap; ++k) (*b)[k] = 0;
  } else if (ellipsis >= 0) {
    return false;  // "::" must stand for at least one group
  }
  return true;
}

bool ParseAddr(std::string_view s, Bytes* b) {
  if (s.find('%') != std::string_view::npos) return false;  // zones are refused
  if (s.find(':') != std::string_view::npos) return ParseIPv6(s, b);
  b->fill(0);
  (*b)[10] = (*b)[11] = 0xFF;
  return ParseIPv4(s, b->data() + 12);
}

bool IsMapped(const Bytes& b) {
  for (int i = 0; i < 10; ++i)
    if (b[i]) return false;
  return b[10] == 0xFF && b[11] == 0xFF;
}

// net.IP.String: IPv4 and IPv4-mapped dotted, else RFC 5952.
std::string IpString(const Bytes& b) {
  char buf[64];
  if (IsMapped(b)) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", b[12], b[13], b[14], b[15]);
    return buf;
  }
  unsigned g[8];
  for (int i = 0; i < 8; ++i) g[i] = (unsigned{b[2 * i]} << 8) | b[2 * i + 1];
  int zs = -1, zl = 0;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i >= 2 && j - i > zl) zs = i, zl = j - i;
    i = j == i ? i + 1 : j;
  }
  std::string r;
  for (int i = 0; i < 8; ++i) {
    if (i == zs) {
      r += "::";
      i += zl - 1;
      continue;
    }
    if (!r.empty() && r.back() != ':') r += ':';
    std::snprintf(buf, sizeof buf, "%x", g[i]);
    r += buf;
  }
  return r;
}

struct Cidr {
  bool set = false;  // false: Go's zero IPNet, printed "<nil>"
  std::string text;
  bool v4 = false;
};

bool ParseCidr(std::string_view s, Cidr* c) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view addr = s.substr(0, slash), mask = s.substr(slash + 1);
  Bytes b{};
  if (!ParseAddr(addr, &b) || mask.empty() || mask.size() > 8) return false;
  unsigned n = 0;
  for (char ch : mask) {
    if (ch < '0' || ch > '9') return false;
    n = n * 10 + static_cast<unsigned>(ch - '0');
  }
  const bool written4 = addr.find(':') == std::string_view::npos;
  if (n > (written4 ? 32u : 128u)) return false;
  c->set = true;
  c->v4 = IsMapped(b);
  unsigned prefix = written4 ? n : c->v4 ? (n > 96 ? n - 96 : 0) : n;
  c->text = IpString(b) + "/" + std::to_string(prefix);
  return true;
}

// ---------------------------------------------------------------- Go's typed decoding

struct Decoder {
  bool v1 = false;
  std::string err;

  bool Bad(std::string what) {
    if (err.empty()) err = "prevResult: " + what;
    return false;
  }

  // The value Go stores into field `name`: keys match case-insensitively (ASCII), the last
  // in byte order wins (the prevResult went through a Go map, so it is marshalled sorted).
  static const JsonValue* Field(const JsonValue& o, std::string_view name) {
    const std::string* best = nullptr;
    const JsonValue* val = nullptr;
    for (size_t i = 0; i < o.keys.size(); ++i) {
      const std::string& k = o.keys[i];
      if (k.size() != name.size()) continue;
      bool eq = true;
      for (size_t j = 0; eq && j < k.size(); ++j) {
        char a = k[j] >= 'A' && k[j] <= 'Z' ? static_cast<char>(k[j] - 'A' + 'a') : k[j];
        char z = name[j] >= 'A' && name[j] <= 'Z' ? static_cast<char>(name[j] - 'A' + 'a') : name[j];
        eq = a == z;
      }
      if (!eq) continue;
      if (!best || k >= *best) best = &k, val = &o.items[i];
    }
    return val;
  }

  bool Str(const JsonValue* v, const std::string& what, std::string* out) {
    out->clear();
    if (!v || v->is(Kind::kNull)) return true;
    if (!v->is(Kind::kString)) return Bad(what + " must be a string");
    *out = v->text;
    return true;
  }

  bool Int(const JsonValue* v, const std::string& what, std::optional<int64_t>* out) {
    out->reset();
    if (!v || v->is(Kind::kNull)) return true;
    int64_t n;
    if (!JsonInt(*v, &n)) return Bad(what + " must be an integer");
    *out = n;
    return true;
  }

  bool Objects(const JsonValue* v, const std::string& what, std::vector<const JsonValue*>* out) {
    out->clear();
    if (!v || v->is(Kind::kNull)) return true;
    if (!v->is(Kind::kArray)) return Bad(what + " must be a list of objects");
    for (const auto& x : v->items) {
      if (!x.is(Kind::kObject)) return Bad(what + " must be a list of objects");
      out->push_back(&x);
    }
    return true;
  }

  bool Strings(const JsonValue* v, const std::string& what, std::vector<std::string>* out) {
    out->clear();
    if (!v || v->is(Kind::kNull)) return true;
    if (!v->is(Kind::kArray)) return Bad(what + " must be a list of strings");
    for (const auto& x : v->items) {
      out->emplace_back();
      if (!Str(&x, what, &out->back())) return false;
    }
    return true;
  }

  bool CidrField(const JsonValue* v, const std::string& what, Cidr* out) {
    *out = Cidr{};
    if (!v) return true;  // absent: the zero IPNet
    if (!v->is(Kind::kString)) return Bad(what + " must be a CIDR string");
    if (!ParseCidr(v->text, out)) return Bad(what + ": invalid CIDR address: " + Printable(v->text));
    return true;
  }

  bool IpField(const JsonValue* v, const std::string& what, std::string* out) {
    std::string s;
    if (!Str(v, what, &s)) return false;
    out->clear();
    if (s.empty()) return true;
    Bytes b{};
    if (!ParseAddr(s, &b)) return Bad(what + ": invalid IP address: " + Printable(s));
    *out = IpString(b);
    return true;
  }
};

// ---------------------------------------------------------------- Go's json.MarshalIndent

// A value to print: a string (quoted), a raw number, an array or an object (keys[i] → items[i]).
struct Out {
  enum class K { kStr, kNum, kArr, kObj } k = K::kObj;
  std::string s;
  std::vector<Out> items;
  std::vector<std::string> keys;

  static Out Str(std::string v) {
    Out o;
    o.k = K::kStr;
    o.s = std::move(v);
    return o;
  }
  static Out Num(int64_t v, bool via_float) {
    Out o;
    o.k = K::kNum;
    if (via_float) {  // 1.x: the value went through a float64 (Go prints integers below 1e21 in full)
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.0f", static_cast<double>(v));
      o.s = buf;
    } else {
      o.s = std::to_string(v);
    }
    return o;
  }
  static Out Arr() {
    Out o;
    o.k = K::kArr;
    return o;
  }
  void Add(std::string key, Out v) {
    keys.push_back(std::move(key));
    items.push_back(std::move(v));
  }
  void Sort() {
    std::vector<size_t> idx(keys.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
    Out sorted;
    for (size_t i : idx) sorted.Add(std::move(keys[i]), std::move(items[i]));
    keys = std::move(sorted.keys);
    items = std::move(sorted.items);
  }
};

void Indent(const Out& v, const std::string& pad, std::string* out) {
  switch (v.k) {
    case Out::K::kStr:
      AppendGoJsonString(out, v.s);
      return;
    case Out::K::kNum:
      *out += v.s;
      return;
    case Out::K::kArr:
    case Out::K::kObj: {
      const bool obj = v.k == Out::K::kObj;
      if (v.items.empty()) {
        *out += obj ? "{}" : "[]";
        return;
      }
      const std::string inner = pad + "    ";
      *out += obj ? "{\n" : "[\n";
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) *out += ",\n";
        *out += inner;
        if (obj) {
          AppendGoJsonString(out, v.keys[i]);
          *out += ": ";
        }
        Indent(v.items[i], inner, out);
      }
      *out += '\n';
      *out += pad;
      *out += obj ? '}' : ']';
      return;
    }
  }
}

bool IsFamily(bool v1, std::string_view v) {
  return v1 ? (v == "1.0.0" || v == "1.1.0") : (v == "0.3.0" || v == "0.3.1" || v == "0.4.0");
}

}  // namespace

bool PassThroughResult(const std::optional<std::string>& prev_result, std::string_view version, std::string* out,
                       std::string* err) {
  const bool v1 = version.substr(0, 2) == "1.";
  Decoder d;
  d.v1 = v1;
  Out interfaces = Out::Arr(), ips = Out::Arr(), routes = Out::Arr(), dns;
  if (prev_result) {
    JsonValue raw;
    JsonError je;
    if (!JsonParse(*prev_result, &raw, &je) || !raw.is(Kind::kObject)) {
      *err = "prevResult: must be an object";
      return false;
    }
    std::vector<const JsonValue*> list;
    if (!d.Objects(Decoder::Field(raw, "interfaces"), "interfaces", &list)) return *err = d.err, false;
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonValue& o = *list[i];
      const std::string at = "interfaces[" + std::to_string(i) + "].";
      std::string name, mac, sandbox, socket_path, pci_id;
      std::optional<int64_t> mtu;
      bool ok = d.Str(Decoder::Field(o, "name"), at + "name", &name) && d.Str(Decoder::Field(o, "mac"), at + "mac", &mac) &&
                d.Str(Decoder::Field(o, "sandbox"), at + "sandbox", &sandbox);
      // 0.3.x/0.4.0 interfaces have no such fields: ignored there, not checked.
      if (ok && v1) {
        ok = d.Int(Decoder::Field(o, "mtu"), at + "mtu", &mtu) &&
             d.Str(Decoder::Field(o, "socketPath"), at + "socketPath", &socket_path) &&
             d.Str(Decoder::Field(o, "pciID"), at + "pciID", &pci_id);
      }
      if (!ok) return *err = d.err, false;
      Out x;
      x.Add("name", Out::Str(name));
      if (!mac.empty()) x.Add("mac", Out::Str(mac));
      if (v1 && mtu.value_or(0) != 0) x.Add("mtu", Out::Num(*mtu, true));
      if (!sandbox.empty()) x.Add("sandbox", Out::Str(sandbox));
      if (!socket_path.empty()) x.Add("socketPath", Out::Str(socket_path));
      if (!pci_id.empty()) x.Add("pciID", Out::Str(pci_id));
      if (v1) x.Sort();
      interfaces.items.push_back(std::move(x));
    }
    if (!d.Objects(Decoder::Field(raw, "ips"), "ips", &list)) return *err = d.err, false;
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonValue& o = *list[i];
      const std::string at = "ips[" + std::to_string(i) + "].";
      std::string ignored, gateway;
      std::optional<int64_t> iface;
      Cidr address;
      bool ok = (v1 || d.Str(Decoder::Field(o, "version"), at + "version", &ignored)) &&
                d.Int(Decoder::Field(o, "interface"), at + "interface", &iface) &&
                d.CidrField(Decoder::Field(o, "address"), at + "address", &address) &&
                d.IpField(Decoder::Field(o, "gateway"), at + "gateway", &gateway);
      if (!ok) return *err = d.err, false;
      Out x;
      if (!v1) x.Add("version", Out::Str(address.v4 ? "4" : "6"));  // recomputed from the address
      if (iface) x.Add("interface", Out::Num(*iface, v1));
      x.Add("address", Out::Str(address.set ? address.text : "<nil>"));
      if (!gateway.empty()) x.Add("gateway", Out::Str(gateway));
      if (v1) x.Sort();
      ips.items.push_back(std::move(x));
    }
    if (!d.Objects(Decoder::Field(raw, "routes"), "routes", &list)) return *err = d.err, false;
    for (size_t i = 0; i < list.size(); ++i) {
      const JsonValue& o = *list[i];
      const std::string at = "routes[" + std::to_string(i) + "].";
      Cidr dst;
      std::string gw;
      std::optional<int64_t> mtu, advmss, priority, table, scope;
      bool ok = d.CidrField(Decoder::Field(o, "dst"), at + "dst", &dst) && d.IpField(Decoder::Field(o, "gw"), at + "gw", &gw) &&
                d.Int(Decoder::Field(o, "mtu"), at + "mtu", &mtu) && d.Int(Decoder::Field(o, "advmss"), at + "advmss", &advmss) &&
                d.Int(Decoder::Field(o, "priority"), at + "priority", &priority) &&
                d.Int(Decoder::Field(o, "table"), at + "table", &table) && d.Int(Decoder::Field(o, "scope"), at + "scope", &scope);
      if (!ok) return *err = d.err, false;
      Out x;
      x.Add("dst", Out::Str(dst.set ? dst.text : "<nil>"));
      if (!gw.empty()) x.Add("gw", Out::Str(gw));
      if (mtu.value_or(0)) x.Add("mtu", Out::Num(*mtu, v1));
      if (advmss.value_or(0)) x.Add("advmss", Out::Num(*advmss, v1));
      if (priority.value_or(0)) x.Add("priority", Out::Num(*priority, v1));
      if (table) x.Add("table", Out::Num(*table, v1));
      if (scope) x.Add("scope", Out::Num(*scope, v1));
      if (v1) x.Sort();
      routes.items.push_back(std::move(x));
    }
    const JsonValue* dv = Decoder::Field(raw, "dns");
    if (dv && !dv->is(Kind::kNull) && !dv->is(Kind::kObject)) {
      *err = "prevResult: dns must be an object";
      return false;
    }
    if (dv && dv->is(Kind::kObject)) {
      std::vector<std::string> nameservers, search, options;
      std::string domain;
      bool ok = d.Strings(Decoder::Field(*dv, "nameservers"), "dns.nameservers", &nameservers) &&
                d.Str(Decoder::Field(*dv, "domain"), "dns.domain", &domain) &&
                d.Strings(Decoder::Field(*dv, "search"), "dns.search", &search) &&
                d.Strings(Decoder::Field(*dv, "options"), "dns.options", &options);
      if (!ok) return *err = d.err, false;
      auto strings = [](const std::vector<std::string>& xs) {
        Out a = Out::Arr();
        for (const auto& s : xs) a.items.push_back(Out::Str(s));
        return a;
      };
      if (!nameservers.empty()) dns.Add("nameservers", strings(nameservers));
      if (!domain.empty()) dns.Add("domain", Out::Str(domain));
      if (!search.empty()) dns.Add("search", strings(search));
      if (!options.empty()) dns.Add("options", strings(options));
      if (v1) dns.Sort();
    }
    // The version check comes after decoding, as in Go (an error either way).
    std::string pv;
    if (!d.Str(Decoder::Field(raw, "cniVersion"), "cniVersion", &pv)) return *err = d.err, false;
    if (!IsFamily(v1, pv)) {
      *err = std::string("prevResult: cniVersion ") + JsonString(pv) + " is not one a " + std::string(version) +
             " configuration takes (" + (v1 ? "1.0.0, 1.1.0" : "0.3.0, 0.3.1, 0.4.0") + ")";
      return false;
    }
  }
  Out top;
  top.Add("cniVersion", Out::Str(std::string(version)));
  if (!interfaces.items.empty()) top.Add("interfaces", std::move(interfaces));
  if (!ips.items.empty()) top.Add("ips", std::move(ips));
  if (!routes.items.empty()) top.Add("routes", std::move(routes));
  if (!v1 || !dns.items.empty()) top.Add("dns", std::move(dns));  // 1.x drops an empty dns
  if (v1) top.Sort();
  out->clear();
  Indent(top, "", out);
  return true;
}

}  // namespace podwire::cni
