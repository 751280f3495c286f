// The node-local decision file (<run dir>/cni-decisions.json, written by the agent:
// lib/cni/decision-file.ts; docs/cni.md): which of this node's pods and namespaces might need
// the mesh. podwire-cni reads it only when the agent is unreachable, to pass at once an ADD of
// a pod that cannot need the mesh. Anything wrong with the file means "no file": fail closed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cni-shim/config.h"

namespace podwire::cni {

inline constexpr size_t kMaxDecisionFile = size_t{1} << 20;

struct DecisionPod {
  std::string namespace_, name, uid;
  bool mesh = false;
};

struct DecisionFile {
  int64_t generation = 0;
  int64_t written_at_ms = 0;
  std::string node;
  std::vector<std::string> exclude_namespaces, mesh_namespaces;
  std::vector<DecisionPod> pods;
};

// Strict: one JSON object with exactly the keys version (= kDecisionFileVersion), generation,
// writtenAtMs (integers ≥ 0), node (string), excludeNamespaces, meshNamespaces (arrays of
// strings) and pods (array of {namespace, name, uid: string, mesh: bool}, exactly those keys);
// a key twice, a missing or unknown key, a wrong type is an error (*err says which).
bool ParseDecisionFile(std::string_view text, DecisionFile* out, std::string* err);

// Opens `path` with O_NOFOLLOW|O_NONBLOCK (a symlink or a FIFO there does not follow or block),
// then requires of the open file: regular, owned by uid 0, no group or other write bit, at most
// kMaxDecisionFile bytes; then ParseDecisionFile. `want_uid` is for tests (0 in the shim).
bool ReadDecisionFile(const std::string& path, DecisionFile* out, std::string* err, uint32_t want_uid = 0);

// What the file says about an ADD (docs/decision-file rules 2, 4 and 5).
enum class FileRule {
  kSidecarAnnotation,  // the runtime's pod annotations carry sidecar.istio.io/status: fail closed
  kPodNoMesh,          // listed with mesh:false: pass
  kPodMesh,            // listed with mesh:true: fail closed
  kMeshNamespace,      // not listed, its namespace is in meshNamespaces: fail closed
  kPlainNamespace,     // not listed, its namespace is not: pass
};
inline bool FileRulePasses(FileRule r) { return r == FileRule::kPodNoMesh || r == FileRule::kPlainNamespace; }
const char* FileRuleName(FileRule r);

// `uid`: K8S_POD_UID ("" when not given); a listed entry with another uid is a previous pod of
// that name and is ignored.
FileRule DecideFromFile(const DecisionFile& f, std::string_view pod_namespace, std::string_view pod_name,
                        std::string_view uid);

}  // namespace podwire::cni
