// libFuzzer target for the netlink framing every socket reply goes through
// (native/common/nlmsg.h): the input is a receive buffer as recvmsg hands it
// to NlSocket::Drain.
//  - Split must only return spans inside the buffer, each at least a header
//    long, 4-aligned and in order; when it accepts the whole buffer the spans
//    (plus padding) cover it exactly.
//  - DecodeError / DecodeDone get each message in an allocation of exactly
//    its length (so ASan sees any read past the message, not just past the
//    buffer). DecodeError is checked against a plain reference decoder
//    written from the kernel's layout (nlmsgerr, the echoed request unless
//    NLM_F_CAPPED, then NLMSGERR_ATTR_* TLVs when NLM_F_ACK_TLVS): same
//    error, same echo, same extack text and offset; the echo lies inside the
//    message, the extack text is bytes of the message.
//  - Renumber must fail exactly when Split does, and otherwise change only
//    the sequence numbers, consecutively.
// Build and run: scripts/fuzz.sh SECONDS (clang, -fsanitize=fuzzer,address,undefined).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/nlmsg.h"

using namespace podwire;

namespace {

#define REQUIRE(cond)                                                     \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "nlmsg_fuzz: invariant failed: %s\n", #cond);  \
      std::abort();                                                       \
    }                                                                     \
  } while (0)

uint32_t Rd32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint16_t Rd16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The reference: 64-bit offsets, no shortcuts.
struct Ref {
  int error = 0;
  size_t echoAt = 0, echoLen = 0;
  std::string msg;
  int offs = -1;
};

bool RefDecodeError(const uint8_t* m, size_t len, Ref* r) {
  if (len < 16 + 20) return false;  // nlmsghdr + nlmsgerr (int error + nlmsghdr)
  uint16_t flags = Rd16(m + 6);
  int32_t error;
  std::memcpy(&error, m + 16, 4);
  r->error = error;
  uint64_t inner = Rd32(m + 20);  // nlmsgerr.msg.nlmsg_len
  bool capped = flags & NLM_F_CAPPED;
  if (!capped && error < 0 && inner > 16 && inner <= len - 20) {
    r->echoAt = 20;
    r->echoLen = inner;
  }
  if (!(flags & NLM_F_ACK_TLVS)) return true;
  uint64_t off;
  if (capped) {
    off = 36;
  } else {
    if (inner < 16) return true;
    off = 20 + ((inner + 3) & ~uint64_t{3});
  }
  while (off + 4 <= len) {
    uint64_t alen = Rd16(m + off);
    uint16_t type = Rd16(m + off + 2) & NLA_TYPE_MASK;
    if (alen < 4 || alen > len - off) break;
    const uint8_t* p = m + off + 4;
    size_t plen = alen - 4;
    if (type == NLMSGERR_ATTR_MSG) {
      size_t n = 0;
      while (n < plen && p[n]) ++n;
      r->msg.assign(reinterpret_cast<const char*>(p), n);
    } else if (type == NLMSGERR_ATTR_OFFS && plen >= 4) {
      r->offs = static_cast<int>(Rd32(p));
    }
    off += (alen + 3) & ~uint64_t{3};
  }
  return true;
}

void CheckError(const uint8_t* data, size_t len) {
  // An exact-size copy: any read past `len` is a heap overflow under ASan.
  std::unique_ptr<uint8_t[]> own(new uint8_t[len ? len : 1]);
  if (len) std::memcpy(own.get(), data, len);
  const uint8_t* m = own.get();
  auto s = nl::DecodeError(m, len);
  Ref ref;
  bool ok = RefDecodeError(m, len, &ref);
  REQUIRE(s.has_value() == ok);
  if (!s) return;
  REQUIRE(s->error == ref.error);
  if (s->echo) {
    REQUIRE(s->echo >= m && s->echo <= m + len);
    REQUIRE(s->echoLen >= sizeof(nlmsghdr) && s->echoLen <= static_cast<size_t>(m + len - s->echo));
    REQUIRE(static_cast<size_t>(s->echo - m) == ref.echoAt && s->echoLen == ref.echoLen);
  } else {
    REQUIRE(s->echoLen == 0 && ref.echoLen == 0);
  }
  REQUIRE(s->extackMsg.size() < len);
  REQUIRE(s->extackMsg == ref.msg);
  REQUIRE(s->extackOffset == ref.offs);
}

void CheckDone(const uint8_t* data, size_t len) {
  std::unique_ptr<uint8_t[]> own(new uint8_t[len ? len : 1]);
  if (len) std::memcpy(own.get(), data, len);
  nl::Status s = nl::DecodeDone(own.get(), len);
  int want = 0;
  if (len >= 20) std::memcpy(&want, own.get() + 16, 4);
  REQUIRE(s.error == want);
  REQUIRE(s.echo == nullptr && s.extackMsg.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The buffer itself, exactly sized.
  std::vector<uint8_t> buf(data, data + size);
  std::vector<nl::MsgSpan> spans;
  bool whole = nl::Split(buf.data(), buf.size(), &spans);
  size_t next = 0;
  for (const auto& m : spans) {
    REQUIRE(m.offset == next);  // in order, no gaps but padding
    REQUIRE(m.offset % NLMSG_ALIGNTO == 0);
    REQUIRE(m.length >= sizeof(nlmsghdr));
    REQUIRE(m.length <= size && m.offset <= size - m.length);
    REQUIRE(nl::Header(buf.data(), m).nlmsg_len == m.length);
    next = m.offset + NLMSG_ALIGN(m.length);
  }
  if (whole) REQUIRE(spans.empty() ? size == 0 : next >= size && next - size < NLMSG_ALIGNTO);

  // Every message the socket would dispatch, decoded as NlSocket::Dispatch does.
  for (const auto& m : spans) {
    nlmsghdr h = nl::Header(buf.data(), m);
    (void)nl::ExpectFor(h);
    if (h.nlmsg_type == NLMSG_ERROR) CheckError(buf.data() + m.offset, m.length);
    else if (h.nlmsg_type == NLMSG_DONE) CheckDone(buf.data() + m.offset, m.length);
  }
  // The decoders on the raw input too (lengths a framing bug could hand them).
  CheckError(data, size);
  CheckDone(data, size);

  // Renumber: fails iff Split does; touches only nlmsg_seq.
  std::vector<uint8_t> copy(data, data + size);
  long n = nl::Renumber(copy.data(), copy.size(), 0xfffffffeu);  // wraps past 0
  REQUIRE((n < 0) == !whole);
  if (n >= 0) {
    REQUIRE(static_cast<size_t>(n) == spans.size());
    uint32_t seq = 0xfffffffeu;
    for (const auto& m : spans) {
      REQUIRE(Rd32(copy.data() + m.offset + 8) == seq++);
      std::memcpy(copy.data() + m.offset + 8, data + m.offset + 8, 4);
    }
    REQUIRE(size == 0 || std::memcmp(copy.data(), data, size) == 0);
  } else {
    REQUIRE(size == 0 || std::memcmp(copy.data(), data, size) == 0);
  }
  return 0;
}
