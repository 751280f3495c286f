// nft's names for the numbers in linux/netfilter/nf_tables.h that podwire's
// expressions use, shared by the encoder (name → number) and the decoder
// (number → name). Unknown numbers decode as `#N`.
#pragma once
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace podwire::nft {

struct Name {
  const char* name;
  int32_t value;
};

inline constexpr Name kMetaKeys[] = {
    {"len", NFT_META_LEN},         {"protocol", NFT_META_PROTOCOL}, {"priority", NFT_META_PRIORITY},
    {"mark", NFT_META_MARK},       {"iif", NFT_META_IIF},           {"oif", NFT_META_OIF},
    {"iifname", NFT_META_IIFNAME}, {"oifname", NFT_META_OIFNAME},   {"iiftype", NFT_META_IIFTYPE},
    {"oiftype", NFT_META_OIFTYPE}, {"skuid", NFT_META_SKUID},       {"skgid", NFT_META_SKGID},
    {"nftrace", NFT_META_NFTRACE}, {"nfproto", NFT_META_NFPROTO},   {"l4proto", NFT_META_L4PROTO},
    {"pkttype", NFT_META_PKTTYPE},
};

inline constexpr Name kCtKeys[] = {
    {"state", NFT_CT_STATE},   {"direction", NFT_CT_DIRECTION}, {"status", NFT_CT_STATUS},
    {"mark", NFT_CT_MARK},     {"expiration", NFT_CT_EXPIRATION}, {"l3proto", NFT_CT_L3PROTOCOL},
    {"protocol", NFT_CT_PROTOCOL}, {"zone", NFT_CT_ZONE},
};

inline constexpr Name kCmpOps[] = {
    {"eq", NFT_CMP_EQ}, {"neq", NFT_CMP_NEQ}, {"lt", NFT_CMP_LT},
    {"lte", NFT_CMP_LTE}, {"gt", NFT_CMP_GT}, {"gte", NFT_CMP_GTE},
};

inline constexpr Name kRangeOps[] = {{"eq", NFT_RANGE_EQ}, {"neq", NFT_RANGE_NEQ}};

inline constexpr Name kPayloadBases[] = {
    {"ll", NFT_PAYLOAD_LL_HEADER}, {"nh", NFT_PAYLOAD_NETWORK_HEADER}, {"th", NFT_PAYLOAD_TRANSPORT_HEADER},
};

inline constexpr Name kVerdicts[] = {
    {"drop", NF_DROP},         {"accept", NF_ACCEPT}, {"continue", NFT_CONTINUE},
    {"break", NFT_BREAK},      {"jump", NFT_JUMP},    {"goto", NFT_GOTO},
    {"return", NFT_RETURN},
};

inline constexpr Name kNatTypes[] = {{"snat", NFT_NAT_SNAT}, {"dnat", NFT_NAT_DNAT}};

template <size_t N>
bool Lookup(const Name (&table)[N], const std::string& name, int32_t* out) {
  for (const auto& n : table)
    if (name == n.name) {
      *out = n.value;
      return true;
    }
  return false;
}

template <size_t N>
std::string NameOf(const Name (&table)[N], int32_t value) {
  for (const auto& n : table)
    if (n.value == value) return n.name;
  std::string s = "#";  // (not "#" + ...: GCC 12 warns falsely on that)
  s += std::to_string(value);
  return s;
}

}  // namespace podwire::nft
