// nf_tables encoder and decoder: batch framing (begin/end, res_id, flags,
// ACK placement), attribute layout of the expressions podwire sends, the
// decoder reading a batch back, bound checks, and truncated input.
#include <endian.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/nlmsg.h"
#include "nft/nft_decode.h"
#include "nft/nft_encode.h"
#include "tests/check.h"

using namespace podwire;
using nft::Command;
using nft::Expr;
using nft::Op;

namespace {

constexpr uint8_t kInet = 1;  // NFPROTO_INET

Command Table(const char* name) {
  Command c;
  c.op = Op::kNewTable;
  c.family = kInet;
  c.table = name;
  return c;
}

Command Chain(const char* table, const char* name, bool base) {
  Command c;
  c.op = Op::kNewChain;
  c.family = kInet;
  c.table = table;
  c.name = name;
  if (base) {
    c.base = true;
    c.chainType = "nat";
    c.hook = 3;
    c.priority = -100;
  }
  return c;
}

// `meta mark and 0xfff != 0x539 counter redirect to :15006`
Command RedirectRule(const char* table, const char* chain) {
  Command c;
  c.op = Op::kNewRule;
  c.family = kInet;
  c.table = table;
  c.name = chain;
  Expr meta;
  meta.type = "meta";
  meta.key = "mark";
  meta.dreg = 1;
  Expr bw;
  bw.type = "bitwise";
  bw.sreg = bw.dreg = 1;
  bw.mask = {0xff, 0x0f, 0, 0};
  bw.xorv = {0, 0, 0, 0};
  Expr cmp;
  cmp.type = "cmp";
  cmp.key = "neq";
  cmp.sreg = 1;
  cmp.data = {0x39, 0x05, 0, 0};
  Expr counter;
  counter.type = "counter";
  Expr imm;
  imm.type = "immediate";
  imm.dreg = 1;
  imm.data = {0x3a, 0x9e};
  Expr redir;
  redir.type = "redir";
  redir.regPort = 1;
  redir.flags = 2;
  c.exprs = {meta, bw, cmp, counter, imm, redir};
  c.comment = "why";
  return c;
}

std::vector<Command> Sample() {
  Command jump;
  jump.op = Op::kNewRule;
  jump.family = kInet;
  jump.table = "t";
  jump.name = "output";
  Expr v;
  v.type = "immediate";
  v.key = "jump";
  v.chain = "c";
  jump.exprs = {v};
  return {Table("t"), Chain("t", "output", true), Chain("t", "c", false), jump, RedirectRule("t", "c")};
}

bool Encode(const std::vector<Command>& cmds, std::vector<uint8_t>* out, std::vector<int>* idx, bool ackEach = true) {
  std::string err;
  return nft::EncodeBatch(cmds, out, idx, &err, ackEach);
}

}  // namespace

TEST(batch_is_framed_by_begin_and_end_with_the_nftables_res_id) {
  std::vector<uint8_t> b;
  std::vector<int> idx;
  CHECK(Encode(Sample(), &b, &idx));
  std::vector<nl::MsgSpan> spans;
  CHECK(nl::Split(b.data(), b.size(), &spans));
  CHECK_EQ(spans.size(), size_t{7});
  CHECK_EQ(idx, (std::vector<int>{-1, 0, 1, 2, 3, 4, -1}));
  nlmsghdr first = nl::Header(b.data(), spans.front()), last = nl::Header(b.data(), spans.back());
  CHECK_EQ(first.nlmsg_type, uint16_t{NFNL_MSG_BATCH_BEGIN});
  CHECK_EQ(last.nlmsg_type, uint16_t{NFNL_MSG_BATCH_END});
  nfgenmsg g;
  std::memcpy(&g, b.data() + NLMSG_HDRLEN, sizeof g);
  CHECK_EQ(be16toh(g.res_id), uint16_t{NFNL_SUBSYS_NFTABLES});
  // Every command asks for an ACK; begin/end do not (kernels before 6.10 never answer them).
  for (size_t i = 1; i + 1 < spans.size(); ++i) {
    nlmsghdr h = nl::Header(b.data(), spans[i]);
    CHECK((h.nlmsg_flags & (NLM_F_REQUEST | NLM_F_ACK)) == (NLM_F_REQUEST | NLM_F_ACK));
    CHECK_EQ(h.nlmsg_type >> 8, NFNL_SUBSYS_NFTABLES);
  }
  CHECK(!(first.nlmsg_flags & NLM_F_ACK) && !(last.nlmsg_flags & NLM_F_ACK));
  CHECK_EQ(nl::Header(b.data(), spans[1]).nlmsg_type & 0xff, NFT_MSG_NEWTABLE);
  CHECK_EQ(nl::Header(b.data(), spans[4]).nlmsg_flags & (NLM_F_CREATE | NLM_F_APPEND), NLM_F_CREATE | NLM_F_APPEND);
}

TEST(only_the_last_command_asks_for_an_ack_without_ackEach) {
  std::vector<uint8_t> b;
  std::vector<int> idx;
  CHECK(Encode(Sample(), &b, &idx, false));
  std::vector<nl::MsgSpan> spans;
  CHECK(nl::Split(b.data(), b.size(), &spans));
  int acks = 0;
  for (auto& s : spans) acks += (nl::Header(b.data(), s).nlmsg_flags & NLM_F_ACK) ? 1 : 0;
  CHECK_EQ(acks, 1);
  CHECK(nl::Header(b.data(), spans[spans.size() - 2]).nlmsg_flags & NLM_F_ACK);
}

TEST(decoder_reads_the_batch_back) {
  std::vector<uint8_t> b;
  std::vector<int> idx;
  CHECK(Encode(Sample(), &b, &idx));
  std::vector<nft::Object> objs;
  CHECK(nft::Decode(b.data(), b.size(), &objs));
  CHECK_EQ(objs.size(), size_t{5});
  CHECK_EQ(objs[0].kind, std::string("table"));
  CHECK_EQ(objs[1].kind, std::string("chain"));
  CHECK(objs[1].base);
  CHECK_EQ(objs[1].priority, -100);
  CHECK_EQ(objs[1].chainType, std::string("nat"));
  CHECK_EQ(objs[1].hook, 3u);
  CHECK(!objs[2].base);
  CHECK_EQ(objs[3].exprs, (std::vector<std::string>{"immediate verdict jump c"}));
  CHECK_EQ(objs[4].exprs, (std::vector<std::string>{
                              "meta load mark => r1",
                              "bitwise r1 = (r1 & 0xff0f0000) ^ 0x00000000",
                              "cmp neq r1 0x39050000",
                              "counter",
                              "immediate r1 0x3a9e",
                              "redir proto r1 flags 2",
                          }));
  CHECK(objs[4].comment.has_value() && *objs[4].comment == "why");
}

TEST(kernel_derived_fields_are_normalised) {
  // A dump's redir carries proto_max = proto_min and the kernel's flags: same text as sent.
  std::vector<uint8_t> b;
  std::vector<int> idx;
  Command r = RedirectRule("t", "c");
  r.exprs.back().flags = 0;  // the kernel adds PROTO_SPECIFIED when a port register is given
  CHECK(Encode({r}, &b, &idx));
  std::vector<nft::Object> objs;
  CHECK(nft::Decode(b.data(), b.size(), &objs));
  CHECK_EQ(objs[0].exprs.back(), std::string("redir proto r1 flags 2"));
}

TEST(invalid_commands_are_refused_with_a_reason) {
  std::vector<uint8_t> b;
  std::vector<int> idx;
  std::string err;
  Command bad = RedirectRule("t", "c");
  bad.exprs[0].key = "no-such-key";
  CHECK(!nft::EncodeBatch({Table("t"), bad}, &b, &idx, &err));
  CHECK(err.find("command 1") != std::string::npos);
  CHECK(b.empty());
  bad = RedirectRule("t", "c");
  bad.exprs[2].data.assign(65, 0);  // > NFT_DATA_VALUE_MAXLEN
  CHECK(!nft::EncodeBatch({bad}, &b, &idx, &err));
  CHECK(!nft::EncodeBatch({Table("")}, &b, &idx, &err));
  Command jump = Sample()[3];
  jump.exprs[0].chain.clear();  // jump without a target
  CHECK(!nft::EncodeBatch({jump}, &b, &idx, &err));
  // A rule too big for one attribute nest (65535 bytes) is an error, not a wrapped length.
  Command huge = RedirectRule("t", "c");
  for (int i = 0; i < 3000; ++i) huge.exprs.push_back(huge.exprs[2]);
  CHECK(!nft::EncodeBatch({huge}, &b, &idx, &err));
  CHECK(err.find("65535") != std::string::npos);
}

TEST(decoder_survives_truncation_at_every_byte) {
  std::vector<uint8_t> b;
  std::vector<int> idx;
  CHECK(Encode(Sample(), &b, &idx));
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(n));
    std::vector<nft::Object> objs;
    nft::Decode(cut.data(), cut.size(), &objs);  // must not crash or read out of bounds (ASan)
    CHECK(objs.size() <= 5);
  }
}

TEST(dump_request_filters_by_table) {
  auto req = nft::DumpRequest(NFT_MSG_GETRULE, kInet, "istio-ambient-nat", "");
  nlmsghdr h;
  std::memcpy(&h, req.data(), sizeof h);
  CHECK_EQ(h.nlmsg_len, req.size());
  CHECK_EQ(h.nlmsg_flags & NLM_F_DUMP, NLM_F_DUMP);
  CHECK_EQ(h.nlmsg_type, uint16_t{(NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE});
  std::string body(reinterpret_cast<const char*>(req.data()), req.size());
  CHECK(body.find("istio-ambient-nat") != std::string::npos);
}

TEST(verify_records_carry_what_verify_compares) {
  std::vector<uint8_t> b;
  std::vector<int> idx;
  CHECK(Encode(Sample(), &b, &idx));
  std::vector<nft::Object> objs;
  CHECK(nft::Decode(b.data(), b.size(), &objs));
  std::string r = nft::VerifyRecords(objs);
  std::vector<std::string> f;
  size_t at = 0;
  for (size_t nul; (nul = r.find('\0', at)) != std::string::npos; at = nul + 1) f.push_back(r.substr(at, nul - at));
  CHECK_EQ(at, r.size());  // every field ends with a NUL, the last one too
  CHECK_EQ(f.size(), objs.size() * nft::kRecordFields);
  auto field = [&](size_t obj, size_t k) { return f[obj * nft::kRecordFields + k]; };
  CHECK_EQ(field(0, 0), std::string("table"));
  CHECK_EQ(field(1, 5), std::string("type nat hook 3 priority -100 policy 1"));
  CHECK_EQ(field(2, 5), std::string("regular"));
  CHECK_EQ(field(3, 5), std::string("immediate verdict jump c"));
  CHECK_EQ(field(4, 5), std::string("meta load mark => r1; bitwise r1 = (r1 & 0xff0f0000) ^ 0x00000000; cmp neq r1 0x39050000; "
                                    "counter; immediate r1 0x3a9e; redir proto r1 flags 2"));
  CHECK_EQ(field(4, 6), std::string("#why"));
  CHECK_EQ(field(3, 6), std::string(""));
  CHECK_EQ(field(4, 1), std::to_string(objs[4].family));
}

TEST_MAIN()
