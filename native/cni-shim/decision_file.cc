// The decision file; see decision_file.h.
#include "cni-shim/decision_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cni-shim/json.h"
#include "common/fd.h"

namespace podwire::cni {

namespace {

using Kind = JsonValue::Kind;

bool Fail(std::string* err, std::string what) {
  if (err) *err = std::move(what);
  return false;
}

// Every key of `o` once, and exactly the `want` set.
bool ExactKeys(const JsonValue& o, std::initializer_list<std::string_view> want, const std::string& where,
               std::string* err) {
  for (size_t i = 0; i < o.keys.size(); ++i) {
    bool known = false;
    for (std::string_view w : want) known = known || o.keys[i] == w;
    if (!known) return Fail(err, where + ": unknown key " + JsonString(o.keys[i]));
    for (size_t j = 0; j < i; ++j)
      if (o.keys[j] == o.keys[i]) return Fail(err, where + ": key " + JsonString(o.keys[i]) + " twice");
  }
  for (std::string_view w : want)
    if (!o.Get(w)) return Fail(err, where + ": no " + std::string(w));
  return true;
}

bool NonNegative(const JsonValue& o, std::string_view key, int64_t* out, std::string* err) {
  if (!JsonInt(*o.Get(key), out) || *out < 0) return Fail(err, std::string(key) + " must be an integer >= 0");
  return true;
}

bool String(const JsonValue& o, std::string_view key, const std::string& where, std::string* out, std::string* err) {
  const JsonValue* v = o.Get(key);
  if (!v->is(Kind::kString)) return Fail(err, where + "." + std::string(key) + " must be a string");
  *out = v->text;
  return true;
}

bool Strings(const JsonValue& o, std::string_view key, std::vector<std::string>* out, std::string* err) {
  const JsonValue* v = o.Get(key);
  if (!v->is(Kind::kArray)) return Fail(err, std::string(key) + " must be an array of strings");
  for (const auto& x : v->items) {
    if (!x.is(Kind::kString)) return Fail(err, std::string(key) + " must be an array of strings");
    out->push_back(x.text);
  }
  return true;
}

}  // namespace

bool ParseDecisionFile(std::string_view text, DecisionFile* out, std::string* err) {
  *out = DecisionFile{};
  JsonValue doc;
  JsonError je;
  if (!JsonParse(text, &doc, &je)) return Fail(err, "not JSON: " + je.what + " at byte " + std::to_string(je.offset));
  if (!doc.is(Kind::kObject)) return Fail(err, "not a JSON object");
  // The version first: a file of another version may have other keys.
  const JsonValue* version = doc.Get("version");
  int64_t v = 0;
  if (!version || !JsonInt(*version, &v) || v != kDecisionFileVersion) {
    return Fail(err, "version is not " + std::to_string(kDecisionFileVersion));
  }
  if (!ExactKeys(doc, {"version", "generation", "writtenAtMs", "node", "excludeNamespaces", "meshNamespaces", "pods"},
                 "file", err)) {
    return false;
  }
  if (!NonNegative(doc, "generation", &out->generation, err) || !NonNegative(doc, "writtenAtMs", &out->written_at_ms, err) ||
      !String(doc, "node", "file", &out->node, err) || !Strings(doc, "excludeNamespaces", &out->exclude_namespaces, err) ||
      !Strings(doc, "meshNamespaces", &out->mesh_namespaces, err)) {
    return false;
  }
  const JsonValue* pods = doc.Get("pods");
  if (!pods->is(Kind::kArray)) return Fail(err, "pods must be an array");
  for (size_t i = 0; i < pods->items.size(); ++i) {
    const JsonValue& p = pods->items[i];
    const std::string where = "pods[" + std::to_string(i) + "]";
    if (!p.is(Kind::kObject)) return Fail(err, where + " must be an object");
    if (!ExactKeys(p, {"namespace", "name", "uid", "mesh"}, where, err)) return false;
    DecisionPod d;
    if (!String(p, "namespace", where, &d.namespace_, err) || !String(p, "name", where, &d.name, err) ||
        !String(p, "uid", where, &d.uid, err)) {
      return false;
    }
    const JsonValue* mesh = p.Get("mesh");
    if (!mesh->is(Kind::kBool)) return Fail(err, where + ".mesh must be a boolean");
    d.mesh = mesh->boolean;
    out->pods.push_back(std::move(d));
  }
  return true;
}

bool ReadDecisionFile(const std::string& path, DecisionFile* out, std::string* err, uint32_t want_uid) {
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!f.valid()) {
    int e = errno;
    return Fail(err, "open " + path + ": " + (e == ELOOP ? std::string("a symlink") : std::string(std::strerror(e))));
  }
  struct stat st;
  if (::fstat(f.get(), &st) != 0) return Fail(err, "fstat " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Fail(err, path + " is not a regular file");
  if (st.st_uid != want_uid) return Fail(err, path + " is owned by uid " + std::to_string(st.st_uid) + ", not root");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return Fail(err, path + " is writable by group or others");
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > kMaxDecisionFile) {
    return Fail(err, path + " is over " + std::to_string(kMaxDecisionFile) + " bytes");
  }
  // Read to EOF, at most one byte past the limit (the file may have grown since fstat).
  std::string text;
  char chunk[64 * 1024];
  for (;;) {
    ssize_t n = ::read(f.get(), chunk, sizeof chunk);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return Fail(err, "read " + path + ": " + std::strerror(errno));
    }
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > kMaxDecisionFile) return Fail(err, path + " is over " + std::to_string(kMaxDecisionFile) + " bytes");
  }
  std::string perr;
  if (!ParseDecisionFile(text, out, &perr)) return Fail(err, path + ": " + perr);
  return true;
}

const char* FileRuleName(FileRule r) {
  switch (r) {
    case FileRule::kSidecarAnnotation: return "the pod's annotations carry sidecar.istio.io/status";
    case FileRule::kPodNoMesh: return "the decision file lists the pod as not in the mesh";
    case FileRule::kPodMesh: return "the decision file lists the pod as in the mesh";
    case FileRule::kMeshNamespace: return "the pod is not in the decision file and its namespace may be in the mesh";
    case FileRule::kPlainNamespace: return "the pod is not in the decision file and its namespace is not in the mesh";
  }
  return "?";
}

FileRule DecideFromFile(const DecisionFile& f, std::string_view pod_namespace, std::string_view pod_name,
                        std::string_view uid) {
  for (const auto& p : f.pods) {
    if (p.namespace_ != pod_namespace || p.name != pod_name) continue;
    if (!uid.empty() && p.uid != uid) continue;  // a previous pod of that name
    return p.mesh ? FileRule::kPodMesh : FileRule::kPodNoMesh;
  }
  for (const auto& ns : f.mesh_namespaces)
    if (ns == pod_namespace) return FileRule::kMeshNamespace;
  return FileRule::kPlainNamespace;
}

}  // namespace podwire::cni
