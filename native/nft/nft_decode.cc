#include "nft_decode.h"

#include <endian.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cstring>

#include "nft_names.h"

namespace podwire::nft {
namespace {

// Attributes of one level, by type (last wins), each a view into the buffer.
// A fixed table, no allocation: a restart decodes every pod's ruleset, about
// three levels of attributes per expression. Types at or above kTypes (none
// in nf_tables) are skipped by get(); Walk still visits them.
struct Span {
  const uint8_t* p = nullptr;
  size_t n = 0;
};

class Attrs {
 public:
  static constexpr uint16_t kTypes = 32;

  Attrs(const uint8_t* p, size_t n) : p_(p), n_(n) {
    Walk([this](uint16_t type, Span s) {
      if (type >= kTypes) return;
      ptr_[type] = s.p;
      len_[type] = s.n;
      present_ |= uint32_t{1} << type;
    });
  }
  explicit Attrs(Span s) : Attrs(s.p, s.n) {}

  // Every attribute in order (a list's NFTA_LIST_ELEMs), bounds checked.
  template <typename F>
  void Walk(F&& f) const {
    size_t off = 0;
    while (n_ - off >= NLA_HDRLEN) {
      nlattr a;
      std::memcpy(&a, p_ + off, sizeof a);
      if (a.nla_len < NLA_HDRLEN || a.nla_len > n_ - off) break;
      f(static_cast<uint16_t>(a.nla_type & NLA_TYPE_MASK), Span{p_ + off + NLA_HDRLEN, static_cast<size_t>(a.nla_len - NLA_HDRLEN)});
      size_t step = NLA_ALIGN(a.nla_len);
      if (step > n_ - off) break;
      off += step;
    }
  }

  bool has(uint16_t t) const { return t < kTypes && ((present_ >> t) & 1) != 0; }
  Span get(uint16_t t) const { return has(t) ? Span{ptr_[t], len_[t]} : Span{}; }
  std::string str(uint16_t t) const {
    Span s = get(t);
    if (s.n == 0) return {};
    return std::string(reinterpret_cast<const char*>(s.p), strnlen(reinterpret_cast<const char*>(s.p), s.n));
  }
  uint32_t be32(uint16_t t, uint32_t dflt = 0) const {
    Span s = get(t);
    if (s.n < 4) return dflt;
    uint32_t v;
    std::memcpy(&v, s.p, 4);
    return be32toh(v);
  }
  uint64_t be64(uint16_t t) const {
    Span s = get(t);
    if (s.n < 8) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | s.p[i];
    return v;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  uint32_t present_ = 0;
  // Only entries whose bit is set in present_ are read: left uninitialised.
  const uint8_t* ptr_[kTypes];
  size_t len_[kTypes];
};

std::string Hex(Span s) {
  static const char* digits = "0123456789abcdef";
  std::string out = "0x";
  for (size_t i = 0; i < s.n; ++i) {
    out += digits[s.p[i] >> 4];
    out += digits[s.p[i] & 15];
  }
  return out;
}

// The value inside an NFTA_DATA_VALUE nest.
Span DataValue(const Attrs& a, uint16_t t) { return Attrs(a.get(t)).get(NFTA_DATA_VALUE); }

std::string R(uint32_t r) {
  std::string s = "r";
  s += std::to_string(r);
  return s;
}

std::string Udata(Span s, uint8_t want) {
  size_t off = 0;
  while (off + 2 <= s.n) {
    uint8_t type = s.p[off], len = s.p[off + 1];
    if (off + 2 + len > s.n) break;
    if (type == want && len > 0)
      return std::string(reinterpret_cast<const char*>(s.p + off + 2), strnlen(reinterpret_cast<const char*>(s.p + off + 2), len));
    off += 2 + len;
  }
  return {};
}

bool HasUdata(Span s, uint8_t want) {
  size_t off = 0;
  while (off + 2 <= s.n) {
    uint8_t type = s.p[off], len = s.p[off + 1];
    if (off + 2 + len > s.n) break;
    if (type == want) return true;
    off += 2 + len;
  }
  return false;
}

// nat/redir flags the kernel sets by itself when a register is given, so a
// sent rule and its dump read the same.
uint32_t NatFlags(uint32_t f, bool addr, bool proto) {
  if (addr) f |= NF_NAT_RANGE_MAP_IPS;
  if (proto) f |= NF_NAT_RANGE_PROTO_SPECIFIED;
  return f;
}

}  // namespace

std::string ExprText(const uint8_t* data, size_t size) {
  Attrs top(data, size);
  std::string name = top.str(NFTA_EXPR_NAME);
  Attrs a(top.get(NFTA_EXPR_DATA));
  std::string t = name;
  if (name == "meta" || name == "ct") {
    bool meta = name == "meta";
    int32_t key = static_cast<int32_t>(a.be32(meta ? uint16_t{NFTA_META_KEY} : uint16_t{NFTA_CT_KEY}));
    std::string k = name == "meta" ? NameOf(kMetaKeys, key) : NameOf(kCtKeys, key);
    uint16_t dreg = meta ? uint16_t{NFTA_META_DREG} : uint16_t{NFTA_CT_DREG};
    uint16_t sreg = meta ? uint16_t{NFTA_META_SREG} : uint16_t{NFTA_CT_SREG};
    if (a.has(dreg)) t += " load " + k + " => " + R(a.be32(dreg));
    else t += " set " + k + " <= " + R(a.be32(sreg));
    if (name == "ct" && a.has(NFTA_CT_DIRECTION)) t += " dir " + std::to_string(a.get(NFTA_CT_DIRECTION).n ? a.get(NFTA_CT_DIRECTION).p[0] : 0);
  } else if (name == "payload") {
    int32_t base = static_cast<int32_t>(a.be32(NFTA_PAYLOAD_BASE));
    if (a.has(NFTA_PAYLOAD_SREG)) {
      t += " write " + std::to_string(a.be32(NFTA_PAYLOAD_LEN)) + "b @ " + NameOf(kPayloadBases, base) + " + " +
           std::to_string(a.be32(NFTA_PAYLOAD_OFFSET)) + " <= " + R(a.be32(NFTA_PAYLOAD_SREG));
    } else {
      t += " load " + std::to_string(a.be32(NFTA_PAYLOAD_LEN)) + "b @ " + NameOf(kPayloadBases, base) + " + " +
           std::to_string(a.be32(NFTA_PAYLOAD_OFFSET)) + " => " + R(a.be32(NFTA_PAYLOAD_DREG));
    }
  } else if (name == "cmp") {
    t += " " + NameOf(kCmpOps, static_cast<int32_t>(a.be32(NFTA_CMP_OP))) + " " + R(a.be32(NFTA_CMP_SREG)) + " " +
         Hex(DataValue(a, NFTA_CMP_DATA));
  } else if (name == "range") {
    t += " " + NameOf(kRangeOps, static_cast<int32_t>(a.be32(NFTA_RANGE_OP))) + " " + R(a.be32(NFTA_RANGE_SREG)) +
         " " + Hex(DataValue(a, NFTA_RANGE_FROM_DATA)) + " " + Hex(DataValue(a, NFTA_RANGE_TO_DATA));
  } else if (name == "bitwise") {
    uint32_t op = a.be32(NFTA_BITWISE_OP, NFT_BITWISE_BOOL);
    t += " " + R(a.be32(NFTA_BITWISE_DREG)) + " = (" + R(a.be32(NFTA_BITWISE_SREG));
    if (op == NFT_BITWISE_BOOL) {
      t += " & " + Hex(DataValue(a, NFTA_BITWISE_MASK)) + ") ^ " + Hex(DataValue(a, NFTA_BITWISE_XOR));
    } else {
      t += " op " + std::to_string(op) + " " + Hex(DataValue(a, NFTA_BITWISE_DATA)) + ")";
    }
  } else if (name == "immediate") {
    uint32_t dreg = a.be32(NFTA_IMMEDIATE_DREG);
    Attrs d(a.get(NFTA_IMMEDIATE_DATA));
    if (dreg == NFT_REG_VERDICT || d.has(NFTA_DATA_VERDICT)) {
      Attrs v(d.get(NFTA_DATA_VERDICT));
      t += " verdict " + NameOf(kVerdicts, static_cast<int32_t>(v.be32(NFTA_VERDICT_CODE)));
      if (v.has(NFTA_VERDICT_CHAIN)) t += " " + v.str(NFTA_VERDICT_CHAIN);
    } else {
      t += " " + R(dreg) + " " + Hex(d.get(NFTA_DATA_VALUE));
    }
  } else if (name == "lookup") {
    // Anonymous sets are named `__set%d` in a batch and `__set<N>` by the kernel.
    std::string set = a.str(NFTA_LOOKUP_SET);
    if (set.rfind("__set", 0) == 0) set = "__set";
    t += " " + R(a.be32(NFTA_LOOKUP_SREG)) + " @" + set;
    if (a.has(NFTA_LOOKUP_DREG)) t += " => " + R(a.be32(NFTA_LOOKUP_DREG));
    if (a.be32(NFTA_LOOKUP_FLAGS) & NFT_LOOKUP_F_INV) t += " inv";
  } else if (name == "counter") {
    // values ignored: a dump's counters move
  } else if (name == "nat") {
    bool addr = a.has(NFTA_NAT_REG_ADDR_MIN), proto = a.has(NFTA_NAT_REG_PROTO_MIN);
    t += " " + NameOf(kNatTypes, static_cast<int32_t>(a.be32(NFTA_NAT_TYPE))) + " family " +
         std::to_string(a.be32(NFTA_NAT_FAMILY));
    if (addr) {
      t += " addr " + R(a.be32(NFTA_NAT_REG_ADDR_MIN));
      if (a.has(NFTA_NAT_REG_ADDR_MAX) && a.be32(NFTA_NAT_REG_ADDR_MAX) != a.be32(NFTA_NAT_REG_ADDR_MIN))
        t += "-" + R(a.be32(NFTA_NAT_REG_ADDR_MAX));
    }
    if (proto) {
      t += " proto " + R(a.be32(NFTA_NAT_REG_PROTO_MIN));
      if (a.has(NFTA_NAT_REG_PROTO_MAX) && a.be32(NFTA_NAT_REG_PROTO_MAX) != a.be32(NFTA_NAT_REG_PROTO_MIN))
        t += "-" + R(a.be32(NFTA_NAT_REG_PROTO_MAX));
    }
    t += " flags " + std::to_string(NatFlags(a.be32(NFTA_NAT_FLAGS), addr, proto));
  } else if (name == "redir" || name == "masq") {
    bool proto = a.has(NFTA_REDIR_REG_PROTO_MIN);
    if (proto) {
      t += " proto " + R(a.be32(NFTA_REDIR_REG_PROTO_MIN));
      if (a.has(NFTA_REDIR_REG_PROTO_MAX) && a.be32(NFTA_REDIR_REG_PROTO_MAX) != a.be32(NFTA_REDIR_REG_PROTO_MIN))
        t += "-" + R(a.be32(NFTA_REDIR_REG_PROTO_MAX));
    }
    t += " flags " + std::to_string(NatFlags(a.be32(NFTA_REDIR_FLAGS), false, proto));
  } else if (name == "tproxy") {
    t += " family " + std::to_string(a.be32(NFTA_TPROXY_FAMILY));
    if (a.has(NFTA_TPROXY_REG_ADDR)) t += " addr " + R(a.be32(NFTA_TPROXY_REG_ADDR));
    if (a.has(NFTA_TPROXY_REG_PORT)) t += " port " + R(a.be32(NFTA_TPROXY_REG_PORT));
  } else {
    // Something podwire never sends: show its raw attributes so drift is visible.
    Span d = top.get(NFTA_EXPR_DATA);
    t += " raw " + Hex(d);
  }
  return t;
}

bool Decode(const uint8_t* data, size_t size, std::vector<Object>* out) {
  size_t off = 0;
  while (off < size) {
    if (size - off < NLMSG_HDRLEN) return false;
    nlmsghdr h;
    std::memcpy(&h, data + off, sizeof h);
    if (h.nlmsg_len < NLMSG_HDRLEN || h.nlmsg_len > size - off) return false;
    const uint8_t* msg = data + off;
    size_t len = h.nlmsg_len;
    size_t step = NLMSG_ALIGN(len);
    off += step > size - off ? size - off : step;

    if ((h.nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES || len < NLMSG_HDRLEN + sizeof(nfgenmsg)) continue;
    nfgenmsg g;
    std::memcpy(&g, msg + NLMSG_HDRLEN, sizeof g);
    Attrs a(msg + NLMSG_HDRLEN + sizeof g, len - NLMSG_HDRLEN - sizeof g);
    Object o;
    o.msgType = h.nlmsg_type & 0xff;
    o.nlFlags = h.nlmsg_flags;
    o.family = g.nfgen_family;
    switch (o.msgType) {
      case NFT_MSG_NEWTABLE:
      case NFT_MSG_DELTABLE:
        o.kind = o.msgType == NFT_MSG_NEWTABLE ? "table" : "deltable";
        o.table = a.str(NFTA_TABLE_NAME);
        o.flags = a.be32(NFTA_TABLE_FLAGS);
        o.handle = a.be64(NFTA_TABLE_HANDLE);
        if (HasUdata(a.get(NFTA_TABLE_USERDATA), 0)) o.comment = Udata(a.get(NFTA_TABLE_USERDATA), 0);
        break;
      case NFT_MSG_NEWCHAIN:
      case NFT_MSG_DELCHAIN: {
        o.kind = o.msgType == NFT_MSG_NEWCHAIN ? "chain" : "delchain";
        o.table = a.str(NFTA_CHAIN_TABLE);
        o.name = a.str(NFTA_CHAIN_NAME);
        o.handle = a.be64(NFTA_CHAIN_HANDLE);
        if (a.has(NFTA_CHAIN_HOOK)) {
          Attrs hk(a.get(NFTA_CHAIN_HOOK));
          o.base = true;
          o.hook = hk.be32(NFTA_HOOK_HOOKNUM);
          o.priority = static_cast<int32_t>(hk.be32(NFTA_HOOK_PRIORITY));
          if (hk.has(NFTA_HOOK_DEV)) o.device = hk.str(NFTA_HOOK_DEV);
          o.chainType = a.str(NFTA_CHAIN_TYPE);
        }
        if (a.has(NFTA_CHAIN_POLICY)) o.policy = a.be32(NFTA_CHAIN_POLICY);
        if (HasUdata(a.get(NFTA_CHAIN_USERDATA), 0)) o.comment = Udata(a.get(NFTA_CHAIN_USERDATA), 0);
        break;
      }
      case NFT_MSG_NEWRULE:
      case NFT_MSG_DELRULE: {
        o.kind = o.msgType == NFT_MSG_NEWRULE ? "rule" : "delrule";
        o.table = a.str(NFTA_RULE_TABLE);
        o.name = a.str(NFTA_RULE_CHAIN);
        o.handle = a.be64(NFTA_RULE_HANDLE);
        o.position = a.be64(NFTA_RULE_POSITION);
        o.ruleId = a.be32(NFTA_RULE_ID);
        o.positionId = a.be32(NFTA_RULE_POSITION_ID);
        Attrs list(a.get(NFTA_RULE_EXPRESSIONS));
        list.Walk([&o](uint16_t type, Span span) {
          if (type == NFTA_LIST_ELEM) o.exprs.push_back(ExprText(span.p, span.n));
        });
        if (HasUdata(a.get(NFTA_RULE_USERDATA), 0)) o.comment = Udata(a.get(NFTA_RULE_USERDATA), 0);
        break;
      }
      case NFT_MSG_NEWSET:
      case NFT_MSG_DELSET:
        o.kind = o.msgType == NFT_MSG_NEWSET ? "set" : "delset";
        o.table = a.str(NFTA_SET_TABLE);
        o.name = a.str(NFTA_SET_NAME);
        o.handle = a.be64(NFTA_SET_HANDLE);
        o.flags = a.be32(NFTA_SET_FLAGS);
        o.keyType = a.be32(NFTA_SET_KEY_TYPE);
        o.keyLen = a.be32(NFTA_SET_KEY_LEN);
        o.setId = a.be32(NFTA_SET_ID);
        if (a.has(NFTA_SET_DESC)) o.size = Attrs(a.get(NFTA_SET_DESC)).be32(NFTA_SET_DESC_SIZE);
        if (HasUdata(a.get(NFTA_SET_USERDATA), 7)) o.comment = Udata(a.get(NFTA_SET_USERDATA), 7);
        break;
      case NFT_MSG_NEWSETELEM:
      case NFT_MSG_DELSETELEM: {
        o.kind = o.msgType == NFT_MSG_NEWSETELEM ? "elem" : "delelem";
        o.table = a.str(NFTA_SET_ELEM_LIST_TABLE);
        o.name = a.str(NFTA_SET_ELEM_LIST_SET);
        o.setId = a.be32(NFTA_SET_ELEM_LIST_SET_ID);
        Attrs list(a.get(NFTA_SET_ELEM_LIST_ELEMENTS));
        list.Walk([&o](uint16_t type, Span span) {
          if (type != NFTA_LIST_ELEM) return;
          Attrs e(span);
          Elem el;
          Span k = DataValue(e, NFTA_SET_ELEM_KEY);
          el.key.assign(k.p, k.p + k.n);
          el.timeoutMs = e.be64(NFTA_SET_ELEM_TIMEOUT);
          if (HasUdata(e.get(NFTA_SET_ELEM_USERDATA), 0)) el.comment = Udata(e.get(NFTA_SET_ELEM_USERDATA), 0);
          o.elems.push_back(std::move(el));
        });
        break;
      }
      default:
        continue;
    }
    out->push_back(std::move(o));
  }
  return true;
}

std::string VerifyRecords(const std::vector<Object>& objs) {
  std::string out;
  auto field = [&out](const std::string& v) {
    out += v;
    out += '\0';
  };
  for (const Object& o : objs) {
    field(o.kind);
    field(std::to_string(o.family));
    field(o.table);
    field(o.name);
    field(std::to_string(o.handle));
    std::string shape;
    if (o.kind == "chain" || o.kind == "delchain") {
      if (!o.base) {
        shape = "regular";
      } else {
        shape = "type " + o.chainType + " hook " + std::to_string(o.hook) + " priority " + std::to_string(o.priority);
        if (!o.device.empty()) shape += " device " + o.device;
        shape += " policy " + std::to_string(o.policy.value_or(1));
      }
    } else if (o.kind == "set" || o.kind == "delset") {
      shape = "key type " + std::to_string(o.keyType) + " len " + std::to_string(o.keyLen);
    } else if (o.kind == "rule" || o.kind == "delrule") {
      for (size_t i = 0; i < o.exprs.size(); ++i) {
        if (i) shape += "; ";
        shape += o.exprs[i];
      }
    }
    field(shape);
    field(o.comment ? "#" + *o.comment : std::string());
  }
  return out;
}

}  // namespace podwire::nft
