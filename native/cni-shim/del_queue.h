// DEL queue records (docs/cni-protocol.md): names and contents of what podwire-cni leaves in
// <run dir>/cni-del-queue/ for a DEL the agent could not take. Pure; the writer is shim_io.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cni-shim/shim_constants.h"

namespace podwire::cni {

struct DelRecord {
  std::string container_id, netns, ifname, pod_namespace, pod_name, pod_uid;
  uint64_t unix_ms = 0;
};

// libcni's container ID rule (^[A-Za-z0-9][A-Za-z0-9_.-]*$), ≤ 200 bytes.
bool IsSafeContainerId(std::string_view id);
// "<unix ms>-<container id>.json", or nullopt when the ID is not safe as a file name.
std::optional<std::string> DelRecordFileName(uint64_t unix_ms, std::string_view container_id);
// The temp name the record is written under before the rename (not counted as a record).
std::string DelRecordTempName(std::string_view final_name, long pid, unsigned attempt);
// A queue entry that counts towards kDelQueueMax: a name ending ".json" that is not hidden.
bool IsDelRecordName(std::string_view name);
inline bool DelQueueHasRoom(size_t records) { return records < kDelQueueMax; }
// {"containerId":…,"netns":…,"ifname":…,"podNamespace":…,"podName":…,"podUid":…,
//  "time":"<RFC 3339 UTC, ms>"} and a newline.
std::string DelRecordJson(const DelRecord& r);
// 2026-12-01T11:21:33.393Z (what JavaScript's Date#toISOString prints).
std::string FormatIsoTimeMs(uint64_t unix_ms);

}  // namespace podwire::cni
