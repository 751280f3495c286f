// DEL queue records; see del_queue.h.
#include "cni-shim/del_queue.h"

#include <cstdio>

#include "cni-shim/json.h"

namespace podwire::cni {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsSafeContainerId(std::string_view id) {
  if (id.empty() || id.size() > 200) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c); };
  if (!alnum(id[0])) return false;
  for (char c : id)
    if (!alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

std::optional<std::string> DelRecordFileName(uint64_t unix_ms, std::string_view container_id) {
  if (!IsSafeContainerId(container_id)) return std::nullopt;
  return std::to_string(unix_ms) + "-" + std::string(container_id) + ".json";
}

std::string DelRecordTempName(std::string_view final_name, long pid, unsigned attempt) {
  return "." + std::string(final_name) + "." + std::to_string(pid) + "." + std::to_string(attempt) + ".tmp";
}

bool IsDelRecordName(std::string_view name) {
  return name.size() > 5 && name[0] != '.' && name.substr(name.size() - 5) == ".json";
}

std::string DelRecordJson(const DelRecord& r) {
  std::string j = "{\"containerId\":";
  AppendJsonString(&j, r.container_id);
  j += ",\"netns\":";
  AppendJsonString(&j, r.netns);
  j += ",\"ifname\":";
  AppendJsonString(&j, r.ifname);
  j += ",\"podNamespace\":";
  AppendJsonString(&j, r.pod_namespace);
  j += ",\"podName\":";
  AppendJsonString(&j, r.pod_name);
  j += ",\"podUid\":";
  AppendJsonString(&j, r.pod_uid);
  j += ",\"time\":";
  AppendJsonString(&j, FormatIsoTimeMs(r.unix_ms));
  j += "}\n";
  return j;
}

std::string FormatIsoTimeMs(uint64_t unix_ms) {
  // Days to civil date (Howard Hinnant's algorithm), proleptic Gregorian, UTC.
  int64_t secs = static_cast<int64_t>(unix_ms / 1000);
  int ms = static_cast<int>(unix_ms % 1000);
  int64_t days = secs / 86400;
  int64_t rem = secs % 86400;
  int64_t z = days + 719468;
  int64_t era = z / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t y = yoe + era * 400;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int64_t d = doy - (153 * mp + 2) / 5 + 1;
  int64_t m = mp < 10 ? mp + 3 : mp - 9;
  if (m <= 2) ++y;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03dZ", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(rem / 3600),
                static_cast<long long>(rem / 60 % 60), static_cast<long long>(rem % 60), ms);
  return buf;
}

}  // namespace podwire::cni
