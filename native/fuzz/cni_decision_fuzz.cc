// libFuzzer target for the decision file parser (native/cni-shim/decision_file.h): the input
// is the file's contents (written by the agent, but read by a root process: hostile input).
//  - ParseDecisionFile never fails without saying why, and fails whenever JsonValidate does.
//  - An accepted file is in range: generation and writtenAtMs ≥ 0, every string valid UTF-8.
//  - A file that parsed re-renders (in the agreed compact form) to text that parses to the
//    same content, and DecideFromFile on each listed pod finds that pod's own entry.
// Build and run: scripts/fuzz.sh SECONDS cni_decision_fuzz.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cni-shim/decision_file.h"
#include "cni-shim/json.h"

using namespace podwire::cni;

namespace {

#define REQUIRE(cond)                                                           \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "cni_decision_fuzz: invariant failed: %s\n", #cond);  \
      std::abort();                                                             \
    }                                                                           \
  } while (0)

std::string List(const std::vector<std::string>& xs) {
  std::string r = "[";
  for (size_t i = 0; i < xs.size(); ++i) r += (i ? "," : "") + JsonString(xs[i]);
  return r + "]";
}

std::string Render(const DecisionFile& f) {
  std::string r = "{\"version\":1,\"generation\":" + std::to_string(f.generation) +
                  ",\"writtenAtMs\":" + std::to_string(f.written_at_ms) + ",\"node\":" + JsonString(f.node) +
                  ",\"excludeNamespaces\":" + List(f.exclude_namespaces) + ",\"meshNamespaces\":" + List(f.mesh_namespaces) +
                  ",\"pods\":[";
  for (size_t i = 0; i < f.pods.size(); ++i) {
    const auto& p = f.pods[i];
    r += (i ? "," : "") + std::string("{\"namespace\":") + JsonString(p.namespace_) + ",\"name\":" + JsonString(p.name) +
         ",\"uid\":" + JsonString(p.uid) + ",\"mesh\":" + (p.mesh ? "true" : "false") + "}";
  }
  return r + "]}";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  DecisionFile f;
  std::string err;
  bool ok = ParseDecisionFile(in, &f, &err);
  JsonError je;
  if (!JsonValidate(in, &je)) REQUIRE(!ok);
  if (!ok) {
    REQUIRE(!err.empty());
    return 0;
  }
  REQUIRE(f.generation >= 0 && f.written_at_ms >= 0);
  REQUIRE(IsValidUtf8(f.node));
  for (const auto& s : f.exclude_namespaces) REQUIRE(IsValidUtf8(s));
  for (const auto& s : f.mesh_namespaces) REQUIRE(IsValidUtf8(s));
  DecisionFile again;
  REQUIRE(ParseDecisionFile(Render(f), &again, &err));
  REQUIRE(Render(again) == Render(f));
  for (const auto& p : f.pods) {
    REQUIRE(IsValidUtf8(p.namespace_) && IsValidUtf8(p.name) && IsValidUtf8(p.uid));
    FileRule r = DecideFromFile(f, p.namespace_, p.name, p.uid);
    // The first entry of that namespace/name/uid decides; it is mesh:true or mesh:false.
    REQUIRE(r == FileRule::kPodMesh || r == FileRule::kPodNoMesh);
  }
  return 0;
}
