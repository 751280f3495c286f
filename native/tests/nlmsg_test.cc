// Netlink framing: splitting, renumbering, what a request waits for, and
// decoding of ACK / error / extended-ack / DONE replies.
#include "common/nlmsg.h"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "tests/check.h"

using namespace podwire;

namespace {

std::vector<uint8_t> Msg(uint16_t type, uint16_t flags, uint32_t seq, size_t payload) {
  std::vector<uint8_t> b(NLMSG_ALIGN(NLMSG_HDRLEN + payload), 0);
  nlmsghdr h{static_cast<uint32_t>(NLMSG_HDRLEN + payload), type, flags, seq, 0};
  std::memcpy(b.data(), &h, sizeof h);
  return b;
}

void Attr(std::vector<uint8_t>& b, uint16_t type, const void* data, size_t len) {
  nlattr a{static_cast<uint16_t>(NLA_HDRLEN + len), type};
  size_t at = b.size();
  b.resize(at + NLA_ALIGN(NLA_HDRLEN + len), 0);
  std::memcpy(b.data() + at, &a, sizeof a);
  std::memcpy(b.data() + at + NLA_HDRLEN, data, len);
}

// An NLMSG_ERROR as the kernel sends it with NETLINK_CAP_ACK + EXT_ACK.
std::vector<uint8_t> ErrorMsg(int error, uint32_t seq, const char* text, int offset) {
  std::vector<uint8_t> b(NLMSG_HDRLEN + sizeof(nlmsgerr), 0);
  nlmsgerr e{};
  e.error = error;
  e.msg = {20, 24, NLM_F_REQUEST | NLM_F_ACK, seq, 0};
  std::memcpy(b.data() + NLMSG_HDRLEN, &e, sizeof e);
  uint16_t flags = NLM_F_CAPPED;
  if (text) {
    flags |= NLM_F_ACK_TLVS;
    Attr(b, NLMSGERR_ATTR_MSG, text, std::strlen(text) + 1);
    uint32_t off = static_cast<uint32_t>(offset);
    Attr(b, NLMSGERR_ATTR_OFFS, &off, 4);
  }
  nlmsghdr h{static_cast<uint32_t>(b.size()), NLMSG_ERROR, flags, seq, 0};
  std::memcpy(b.data(), &h, sizeof h);
  return b;
}

}  // namespace

TEST(SplitWalksAlignedMessages) {
  auto a = Msg(24, NLM_F_REQUEST, 0, 3);  // 19 bytes, padded to 20
  auto b = Msg(25, NLM_F_REQUEST, 0, 8);
  std::vector<uint8_t> buf(a);
  buf.insert(buf.end(), b.begin(), b.end());
  std::vector<nl::MsgSpan> spans;
  CHECK(nl::Split(buf.data(), buf.size(), &spans));
  CHECK_EQ(spans.size(), 2u);
  CHECK_EQ(spans[0].length, 19u);
  CHECK_EQ(spans[1].offset, 20u);
}

TEST(SplitRejectsBadLengths) {
  auto a = Msg(24, 0, 0, 4);
  std::vector<nl::MsgSpan> spans;
  CHECK(!nl::Split(a.data(), 10, &spans));                 // shorter than a header
  uint32_t bogus = 4096;
  std::memcpy(a.data(), &bogus, 4);
  CHECK(!nl::Split(a.data(), a.size(), &spans));           // runs past the buffer
  uint32_t tiny = 8;
  std::memcpy(a.data(), &tiny, 4);
  CHECK(!nl::Split(a.data(), a.size(), &spans));           // shorter than its own header
}

TEST(RenumberAssignsConsecutiveSequences) {
  auto a = Msg(24, 0, 0, 4);
  auto b = Msg(24, 0, 0, 4);
  std::vector<uint8_t> buf(a);
  buf.insert(buf.end(), b.begin(), b.end());
  CHECK_EQ(nl::Renumber(buf.data(), buf.size(), 41), 2L);
  std::vector<nl::MsgSpan> spans;
  nl::Split(buf.data(), buf.size(), &spans);
  CHECK_EQ(nl::Header(buf.data(), spans[0]).nlmsg_seq, 41u);
  CHECK_EQ(nl::Header(buf.data(), spans[1]).nlmsg_seq, 42u);
}

TEST(ExpectFollowsFlags) {
  nlmsghdr dump{16, 18, NLM_F_REQUEST | NLM_F_DUMP, 0, 0};
  nlmsghdr ack{16, 24, NLM_F_REQUEST | NLM_F_ACK, 0, 0};
  nlmsghdr none{16, 24, NLM_F_REQUEST, 0, 0};
  CHECK(nl::ExpectFor(dump) == nl::Expect::kDone);
  CHECK(nl::ExpectFor(ack) == nl::Expect::kAck);
  CHECK(nl::ExpectFor(none) == nl::Expect::kNone);
}

TEST(DecodeAck) {
  auto m = ErrorMsg(0, 7, nullptr, 0);
  auto s = nl::DecodeError(m.data(), m.size());
  CHECK(s.has_value());
  CHECK_EQ(s->error, 0);
  CHECK(s->extackMsg.empty());
}

TEST(DecodeErrorWithExtendedAck) {
  auto m = ErrorMsg(-EEXIST, 7, "Route exists", 36);
  auto s = nl::DecodeError(m.data(), m.size());
  CHECK(s.has_value());
  CHECK_EQ(s->error, -EEXIST);
  CHECK_EQ(s->extackMsg, std::string("Route exists"));
  CHECK_EQ(s->extackOffset, 36);
}

TEST(DecodeErrorTruncatedIsRejected) {
  auto m = ErrorMsg(-EINVAL, 1, nullptr, 0);
  CHECK(!nl::DecodeError(m.data(), NLMSG_HDRLEN + 2).has_value());
}

TEST(DecodeErrorSkipsEchoedPayloadWhenNotCapped) {
  // Without NETLINK_CAP_ACK the request (here 8 payload bytes) is echoed.
  std::vector<uint8_t> b(NLMSG_HDRLEN + sizeof(nlmsgerr) + 8, 0);
  nlmsgerr e{};
  e.error = -ENOENT;
  e.msg = {NLMSG_HDRLEN + 8, 24, 0, 1, 0};
  std::memcpy(b.data() + NLMSG_HDRLEN, &e, sizeof e);
  Attr(b, NLMSGERR_ATTR_MSG, "nope", 5);
  nlmsghdr h{static_cast<uint32_t>(b.size()), NLMSG_ERROR, NLM_F_ACK_TLVS, 1, 0};
  std::memcpy(b.data(), &h, sizeof h);
  auto s = nl::DecodeError(b.data(), b.size());
  CHECK(s.has_value());
  CHECK_EQ(s->extackMsg, std::string("nope"));
  // The echoed request is handed up (ipset writes the failing line into it).
  CHECK(s->echo == b.data() + NLMSG_HDRLEN + offsetof(nlmsgerr, msg));
  CHECK_EQ(s->echoLen, static_cast<size_t>(NLMSG_HDRLEN + 8));
  // A capped error has no echo.
  auto capped = ErrorMsg(-EEXIST, 7, "x", 0);
  CHECK(nl::DecodeError(capped.data(), capped.size())->echo == nullptr);
}

TEST(DecodeErrorIgnoresAnEchoLongerThanTheMessage) {
  // An uncapped error whose echoed header claims 0xFFFFFFFD bytes: aligning
  // that length in 32 bits wrapped to 0 and the TLV walk restarted inside
  // nlmsgerr, reading its bytes as a 65533-byte NLMSGERR_ATTR_MSG.
  std::vector<uint8_t> b(NLMSG_HDRLEN + sizeof(nlmsgerr) + 65536, 'A');
  nlmsgerr e{};
  e.error = -EINVAL;
  e.msg = {0xFFFFFFFDu, 0xFFFF, 0, 1, 0};
  std::memcpy(b.data() + NLMSG_HDRLEN, &e, sizeof e);
  // Where that misread attribute ends, a well-formed one: it must not be taken.
  nlattr bogus{8, NLMSGERR_ATTR_MSG};
  std::memcpy(b.data() + 20 + 65536, &bogus, sizeof bogus);
  std::memcpy(b.data() + 20 + 65536 + NLA_HDRLEN, "bad", 4);
  nlmsghdr h{static_cast<uint32_t>(b.size()), NLMSG_ERROR, NLM_F_ACK_TLVS, 1, 0};
  std::memcpy(b.data(), &h, sizeof h);
  auto s = nl::DecodeError(b.data(), b.size());
  CHECK(s.has_value());
  CHECK_EQ(s->error, -EINVAL);
  CHECK(s->echo == nullptr);
  CHECK(s->extackMsg.empty());
  CHECK_EQ(s->extackOffset, -1);
}

TEST(DecodeDoneCarriesStatus) {
  auto m = Msg(NLMSG_DONE, NLM_F_MULTI, 3, sizeof(int));
  int err = -EINTR;
  std::memcpy(m.data() + NLMSG_HDRLEN, &err, sizeof err);
  CHECK_EQ(nl::DecodeDone(m.data(), NLMSG_HDRLEN + sizeof(int)).error, -EINTR);
  CHECK_EQ(nl::DecodeDone(m.data(), NLMSG_HDRLEN).error, 0);
}

TEST_MAIN()
