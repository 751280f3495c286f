#include "nft_encode.h"

#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include "nft_names.h"
#include "nl_writer.h"

namespace podwire::nft {
namespace {

constexpr uint16_t kMaxNest = 0xffff;
constexpr size_t kMaxData = 64;      // NFT_DATA_VALUE_MAXLEN
constexpr size_t kMaxName = 255;     // NFT_NAME_MAXLEN - 1
constexpr size_t kMaxComment = 127;  // libnftnl's comment bound (128 with the NUL)
constexpr uint8_t kUdataComment = 0; // NFTNL_UDATA_{TABLE,CHAIN,RULE,SET_ELEM}_COMMENT
constexpr uint8_t kUdataSetKeyByteorder = 0;
constexpr uint8_t kUdataSetComment = 7;
constexpr uint32_t kByteorderBig = 2;  // nft's BYTEORDER_BIG_ENDIAN

uint16_t MsgType(int cmd) { return static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | cmd); }

// Collects the first error; every writer call after one is harmless.
struct Ctx {
  NlWriter w;
  std::string* error;
  bool ackEach = true;
  bool last = false;  // encoding the last command
  bool ok = true;
  bool Fail(const std::string& e) {
    if (ok) *error = e;
    ok = false;
    return false;
  }
  bool CloseNest(size_t at) {
    if (w.size() - at > kMaxNest) return Fail("attribute nest longer than 65535 bytes");
    w.EndNest(at);
    return true;
  }
};

bool Name(Ctx& c, const std::string& s, const char* what) {
  if (s.empty() || s.size() > kMaxName || s.find('\0') != std::string::npos)
    return c.Fail(std::string("invalid ") + what + " name");
  return true;
}

// NFTA_DATA_VALUE inside a nest of type `type`.
bool Data(Ctx& c, uint16_t type, const Bytes& v) {
  if (v.empty() || v.size() > kMaxData) return c.Fail("data value must be 1..64 bytes");
  size_t n = c.w.Nest(type);
  c.w.Attr(NFTA_DATA_VALUE, v.data(), v.size());
  return c.CloseNest(n);
}

// A udata TLV list holding a comment (plus extra TLVs already in `tlv`).
bool Comment(Ctx& c, uint8_t tlvType, const std::string& text, Bytes* tlv) {
  if (text.size() > kMaxComment || text.find('\0') != std::string::npos) return c.Fail("invalid comment");
  tlv->push_back(tlvType);
  tlv->push_back(static_cast<uint8_t>(text.size() + 1));
  tlv->insert(tlv->end(), text.begin(), text.end());
  tlv->push_back(0);
  return true;
}

bool Reg(Ctx& c, uint32_t r) {
  if (r > NFT_REG32_15) return c.Fail("register out of range");
  return true;
}

bool EncodeExpr(Ctx& c, const Expr& e) {
  size_t elem = c.w.Nest(NFTA_LIST_ELEM);
  c.w.Str(NFTA_EXPR_NAME, e.type);
  size_t data = c.w.Nest(NFTA_EXPR_DATA);
  int32_t v = 0;
  if (!Reg(c, e.dreg) || !Reg(c, e.sreg) || !Reg(c, e.regAddr) || !Reg(c, e.regPort)) return false;
  if (e.type == "meta" || e.type == "ct") {
    bool ok = e.type == "meta" ? Lookup(kMetaKeys, e.key, &v) : Lookup(kCtKeys, e.key, &v);
    if (!ok) return c.Fail(e.type + ": unknown key " + e.key);
    if ((e.dreg == 0) == (e.sreg == 0)) return c.Fail(e.type + ": exactly one of dreg/sreg");
    if (e.type == "meta") {
      c.w.Be32(NFTA_META_KEY, static_cast<uint32_t>(v));
      c.w.Be32(e.dreg ? NFTA_META_DREG : NFTA_META_SREG, e.dreg ? e.dreg : e.sreg);
    } else {
      c.w.Be32(NFTA_CT_KEY, static_cast<uint32_t>(v));
      c.w.Be32(e.dreg ? NFTA_CT_DREG : NFTA_CT_SREG, e.dreg ? e.dreg : e.sreg);
    }
  } else if (e.type == "payload") {
    if (!Lookup(kPayloadBases, e.base, &v)) return c.Fail("payload: unknown base " + e.base);
    if (e.len == 0 || e.len > kMaxData || e.dreg == 0) return c.Fail("payload: bad length or register");
    c.w.Be32(NFTA_PAYLOAD_DREG, e.dreg);
    c.w.Be32(NFTA_PAYLOAD_BASE, static_cast<uint32_t>(v));
    c.w.Be32(NFTA_PAYLOAD_OFFSET, e.offset);
    c.w.Be32(NFTA_PAYLOAD_LEN, e.len);
  } else if (e.type == "cmp") {
    if (!Lookup(kCmpOps, e.key, &v)) return c.Fail("cmp: unknown op " + e.key);
    c.w.Be32(NFTA_CMP_SREG, e.sreg);
    c.w.Be32(NFTA_CMP_OP, static_cast<uint32_t>(v));
    if (!Data(c, NFTA_CMP_DATA, e.data)) return false;
  } else if (e.type == "range") {
    if (!Lookup(kRangeOps, e.key, &v)) return c.Fail("range: unknown op " + e.key);
    if (e.data.size() != e.data2.size()) return c.Fail("range: bounds of different length");
    c.w.Be32(NFTA_RANGE_SREG, e.sreg);
    c.w.Be32(NFTA_RANGE_OP, static_cast<uint32_t>(v));
    if (!Data(c, NFTA_RANGE_FROM_DATA, e.data) || !Data(c, NFTA_RANGE_TO_DATA, e.data2)) return false;
  } else if (e.type == "bitwise") {
    if (e.mask.size() != e.xorv.size()) return c.Fail("bitwise: mask and xor of different length");
    c.w.Be32(NFTA_BITWISE_SREG, e.sreg);
    c.w.Be32(NFTA_BITWISE_DREG, e.dreg);
    c.w.Be32(NFTA_BITWISE_LEN, static_cast<uint32_t>(e.mask.size()));
    if (!Data(c, NFTA_BITWISE_MASK, e.mask) || !Data(c, NFTA_BITWISE_XOR, e.xorv)) return false;
  } else if (e.type == "immediate") {
    c.w.Be32(NFTA_IMMEDIATE_DREG, e.dreg);
    if (e.dreg == NFT_REG_VERDICT) {
      if (!Lookup(kVerdicts, e.key, &v)) return c.Fail("immediate: unknown verdict " + e.key);
      size_t d = c.w.Nest(NFTA_IMMEDIATE_DATA);
      size_t vn = c.w.Nest(NFTA_DATA_VERDICT);
      c.w.Be32(NFTA_VERDICT_CODE, static_cast<uint32_t>(v));
      bool needsChain = v == NFT_JUMP || v == NFT_GOTO;
      if (needsChain != !e.chain.empty()) return c.Fail("immediate: jump/goto need a chain, others none");
      if (needsChain) {
        if (!Name(c, e.chain, "chain")) return false;
        c.w.Str(NFTA_VERDICT_CHAIN, e.chain);
      }
      if (!c.CloseNest(vn) || !c.CloseNest(d)) return false;
    } else if (!Data(c, NFTA_IMMEDIATE_DATA, e.data)) {
      return false;
    }
  } else if (e.type == "lookup") {
    if (!Name(c, e.set, "set")) return false;
    c.w.Str(NFTA_LOOKUP_SET, e.set);
    c.w.Be32(NFTA_LOOKUP_SREG, e.sreg);
    if (e.setId) c.w.Be32(NFTA_LOOKUP_SET_ID, e.setId);
    if (e.flags) c.w.Be32(NFTA_LOOKUP_FLAGS, e.flags);
  } else if (e.type == "counter") {
    c.w.Be64(NFTA_COUNTER_BYTES, 0);
    c.w.Be64(NFTA_COUNTER_PACKETS, 0);
  } else if (e.type == "nat") {
    if (!Lookup(kNatTypes, e.key, &v)) return c.Fail("nat: unknown type " + e.key);
    c.w.Be32(NFTA_NAT_TYPE, static_cast<uint32_t>(v));
    c.w.Be32(NFTA_NAT_FAMILY, e.family);
    if (e.regAddr) c.w.Be32(NFTA_NAT_REG_ADDR_MIN, e.regAddr);
    if (e.regPort) c.w.Be32(NFTA_NAT_REG_PROTO_MIN, e.regPort);
    if (e.flags) c.w.Be32(NFTA_NAT_FLAGS, e.flags);
  } else if (e.type == "redir") {
    if (e.regPort) c.w.Be32(NFTA_REDIR_REG_PROTO_MIN, e.regPort);
    if (e.flags) c.w.Be32(NFTA_REDIR_FLAGS, e.flags);
  } else if (e.type == "tproxy") {
    c.w.Be32(NFTA_TPROXY_FAMILY, e.family);
    if (e.regAddr) c.w.Be32(NFTA_TPROXY_REG_ADDR, e.regAddr);
    if (e.regPort) c.w.Be32(NFTA_TPROXY_REG_PORT, e.regPort);
  } else {
    return c.Fail("unknown expression " + e.type);
  }
  return c.CloseNest(data) && c.CloseNest(elem);
}

bool EncodeCommand(Ctx& c, const Command& k) {
  const uint16_t ack = NLM_F_REQUEST | (c.ackEach || c.last ? NLM_F_ACK : 0);
  const uint16_t create = NLM_F_CREATE | (k.excl ? NLM_F_EXCL : 0);
  if (!Name(c, k.table, "table")) return false;
  switch (k.op) {
    case Op::kNewTable: {
      c.w.Begin(MsgType(NFT_MSG_NEWTABLE), ack | create, k.family, 0);
      c.w.Str(NFTA_TABLE_NAME, k.table);
      c.w.Be32(NFTA_TABLE_FLAGS, k.tableFlags);
      if (k.comment) {
        Bytes u;
        if (!Comment(c, kUdataComment, *k.comment, &u)) return false;
        c.w.Attr(NFTA_TABLE_USERDATA, u.data(), u.size());
      }
      return true;
    }
    case Op::kDelTable:
      c.w.Begin(MsgType(NFT_MSG_DELTABLE), ack, k.family, 0);
      c.w.Str(NFTA_TABLE_NAME, k.table);
      return true;
    case Op::kFlushTable:
    case Op::kFlushChain:
      c.w.Begin(MsgType(NFT_MSG_DELRULE), ack, k.family, 0);
      c.w.Str(NFTA_RULE_TABLE, k.table);
      if (k.op == Op::kFlushChain) {
        if (!Name(c, k.name, "chain")) return false;
        c.w.Str(NFTA_RULE_CHAIN, k.name);
      }
      return true;
    case Op::kNewChain: {
      if (!Name(c, k.name, "chain")) return false;
      c.w.Begin(MsgType(NFT_MSG_NEWCHAIN), ack | create, k.family, 0);
      c.w.Str(NFTA_CHAIN_TABLE, k.table);
      c.w.Str(NFTA_CHAIN_NAME, k.name);
      if (k.base) {
        size_t h = c.w.Nest(NFTA_CHAIN_HOOK);
        c.w.Be32(NFTA_HOOK_HOOKNUM, k.hook);
        c.w.Be32(NFTA_HOOK_PRIORITY, static_cast<uint32_t>(k.priority));
        if (!k.device.empty()) c.w.Str(NFTA_HOOK_DEV, k.device);
        if (!c.CloseNest(h)) return false;
        if (k.chainType.empty() || k.chainType.size() > 15) return c.Fail("invalid chain type");
        c.w.Str(NFTA_CHAIN_TYPE, k.chainType);
      }
      if (k.policy) c.w.Be32(NFTA_CHAIN_POLICY, *k.policy);
      if (k.comment) {
        Bytes u;
        if (!Comment(c, kUdataComment, *k.comment, &u)) return false;
        c.w.Attr(NFTA_CHAIN_USERDATA, u.data(), u.size());
      }
      return true;
    }
    case Op::kDelChain:
      if (!Name(c, k.name, "chain")) return false;
      c.w.Begin(MsgType(NFT_MSG_DELCHAIN), ack, k.family, 0);
      c.w.Str(NFTA_CHAIN_TABLE, k.table);
      c.w.Str(NFTA_CHAIN_NAME, k.name);
      return true;
    case Op::kNewRule: {
      if (!Name(c, k.name, "chain")) return false;
      c.w.Begin(MsgType(NFT_MSG_NEWRULE), ack | NLM_F_CREATE | (k.append ? NLM_F_APPEND : 0), k.family, 0);
      c.w.Str(NFTA_RULE_TABLE, k.table);
      c.w.Str(NFTA_RULE_CHAIN, k.name);
      if (k.position) c.w.Be64(NFTA_RULE_POSITION, k.position);
      size_t list = c.w.Nest(NFTA_RULE_EXPRESSIONS);
      for (const Expr& e : k.exprs)
        if (!EncodeExpr(c, e)) return false;
      if (!c.CloseNest(list)) return false;
      if (k.comment) {
        Bytes u;
        if (!Comment(c, kUdataComment, *k.comment, &u)) return false;
        c.w.Attr(NFTA_RULE_USERDATA, u.data(), u.size());
      }
      if (k.ruleId) c.w.Be32(NFTA_RULE_ID, k.ruleId);
      if (k.positionId) c.w.Be32(NFTA_RULE_POSITION_ID, k.positionId);
      return true;
    }
    case Op::kNewSet: {
      if (!Name(c, k.name, "set")) return false;
      if (k.keyLen == 0 || k.keyLen > kMaxData) return c.Fail("set key length must be 1..64");
      c.w.Begin(MsgType(NFT_MSG_NEWSET), ack | create, k.family, 0);
      c.w.Str(NFTA_SET_TABLE, k.table);
      c.w.Str(NFTA_SET_NAME, k.name);
      c.w.Be32(NFTA_SET_FLAGS, k.setFlags);
      c.w.Be32(NFTA_SET_KEY_TYPE, k.keyType);
      c.w.Be32(NFTA_SET_KEY_LEN, k.keyLen);
      if (k.timeoutMs) c.w.Be64(NFTA_SET_TIMEOUT, k.timeoutMs);
      if (k.setId) c.w.Be32(NFTA_SET_ID, k.setId);
      if (k.size) {
        size_t d = c.w.Nest(NFTA_SET_DESC);
        c.w.Be32(NFTA_SET_DESC_SIZE, k.size);
        if (!c.CloseNest(d)) return false;
      }
      // Key byte order (for nft's listing of integer keys) and comment.
      Bytes u = {kUdataSetKeyByteorder, 4};
      uint32_t bo = kByteorderBig;
      u.insert(u.end(), reinterpret_cast<uint8_t*>(&bo), reinterpret_cast<uint8_t*>(&bo) + 4);
      if (k.comment && !Comment(c, kUdataSetComment, *k.comment, &u)) return false;
      c.w.Attr(NFTA_SET_USERDATA, u.data(), u.size());
      return true;
    }
    case Op::kDelSet:
      if (!Name(c, k.name, "set")) return false;
      c.w.Begin(MsgType(NFT_MSG_DELSET), ack, k.family, 0);
      c.w.Str(NFTA_SET_TABLE, k.table);
      c.w.Str(NFTA_SET_NAME, k.name);
      return true;
    case Op::kFlushSet:
    case Op::kNewElem:
    case Op::kDelElem: {
      if (!Name(c, k.name, "set")) return false;
      int cmd = k.op == Op::kNewElem ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM;
      c.w.Begin(MsgType(cmd), ack | (k.op == Op::kNewElem ? create : 0), k.family, 0);
      c.w.Str(NFTA_SET_ELEM_LIST_TABLE, k.table);
      c.w.Str(NFTA_SET_ELEM_LIST_SET, k.name);
      if (k.setId) c.w.Be32(NFTA_SET_ELEM_LIST_SET_ID, k.setId);
      if (k.op == Op::kFlushSet) return true;
      if (k.elems.empty()) return c.Fail("no elements");
      size_t list = c.w.Nest(NFTA_SET_ELEM_LIST_ELEMENTS);
      for (const Elem& el : k.elems) {
        size_t n = c.w.Nest(NFTA_LIST_ELEM);
        if (!Data(c, NFTA_SET_ELEM_KEY, el.key)) return false;
        if (el.timeoutMs) c.w.Be64(NFTA_SET_ELEM_TIMEOUT, el.timeoutMs);
        if (el.comment) {
          Bytes u;
          if (!Comment(c, kUdataComment, *el.comment, &u)) return false;
          c.w.Attr(NFTA_SET_ELEM_USERDATA, u.data(), u.size());
        }
        if (!c.CloseNest(n)) return false;
      }
      return c.CloseNest(list);
    }
  }
  return c.Fail("unknown command");
}

}  // namespace

bool EncodeBatch(const std::vector<Command>& cmds, std::vector<uint8_t>* out, std::vector<int>* msgCommand,
                 std::string* error, bool ackEach) {
  out->clear();
  msgCommand->clear();
  Ctx c{NlWriter(out), error, ackEach};
  c.w.Begin(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, NFPROTO_UNSPEC, NFNL_SUBSYS_NFTABLES);
  msgCommand->push_back(-1);
  for (size_t i = 0; i < cmds.size() && c.ok; ++i) {
    c.last = i + 1 == cmds.size();
    if (!EncodeCommand(c, cmds[i])) {
      *error = "command " + std::to_string(i) + ": " + *error;
      break;
    }
    msgCommand->push_back(static_cast<int>(i));
  }
  if (!c.ok) {
    out->clear();
    msgCommand->clear();
    return false;
  }
  c.w.Begin(NFNL_MSG_BATCH_END, NLM_F_REQUEST, NFPROTO_UNSPEC, NFNL_SUBSYS_NFTABLES);
  c.w.End();
  msgCommand->push_back(-1);
  return true;
}

std::vector<uint8_t> DumpRequest(uint16_t msg, uint8_t family, const std::string& table, const std::string& set) {
  std::vector<uint8_t> out;
  NlWriter w(&out);
  w.Begin(MsgType(msg), NLM_F_REQUEST | NLM_F_DUMP, family, 0);
  if (msg == NFT_MSG_GETRULE && !table.empty()) w.Str(NFTA_RULE_TABLE, table);
  if (msg == NFT_MSG_GETSET && !table.empty()) w.Str(NFTA_SET_TABLE, table);
  if (msg == NFT_MSG_GETSETELEM) {
    w.Str(NFTA_SET_ELEM_LIST_TABLE, table);
    w.Str(NFTA_SET_ELEM_LIST_SET, set);
  }
  w.End();
  return out;
}

}  // namespace podwire::nft
