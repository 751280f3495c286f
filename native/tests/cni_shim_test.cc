// podwire-cni's pure logic (native/cni-shim/: json.h, config.h, http_response.h,
// fallback.h, cni_result.h, decision_file.h, del_queue.h): the JSON reader and
// quoter, the stdin config, CNI_ARGS, the CNI_* environment, the request, the
// agent's response, the decisions without the agent, the pass-through result
// against upstream's goldens, the decision file and DEL records; plus the I/O
// (shim_io.h, ReadDecisionFile) on a temp dir, pipes and unix sockets of the
// test's own.
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cni-shim/cni_result.h"
#include "cni-shim/config.h"
#include "cni-shim/decision_file.h"
#include "cni-shim/del_queue.h"
#include "cni-shim/fallback.h"
#include "cni-shim/http_response.h"
#include "cni-shim/json.h"
#include "cni-shim/shim_io.h"
#include "common/fd.h"
#include "tests/check.h"

using namespace podwire;
using namespace podwire::cni;

namespace {

bool Valid(std::string_view s) {
  JsonError e;
  return JsonValidate(s, &e);
}

std::string Unq(std::string_view lit) {
  std::string out;
  JsonError e;
  if (!JsonUnquote(lit, &out, &e)) return "<error: " + e.what + ">";
  return out;
}

bool Cfg(std::string_view text, Config* c, ConfigError* e) { return ParseConfig(text, c, e); }

int CfgErrCode(std::string_view text) {
  Config c;
  ConfigError e;
  return ParseConfig(text, &c, &e) ? 0 : e.code;
}

Response Parse(std::string_view s, bool eof = false) { return ParseResponse(s, eof); }

std::string Body(std::string_view buf, const Response& r) { return std::string(buf.substr(r.body_offset, r.body_len)); }

int OpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

std::string TempDir() {
  char tmpl[] = "/tmp/pwt-cnishim-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  return d ? d : "";
}

void RemoveTree(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      std::string p = path + "/" + n;
      struct stat st;
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) RemoveTree(p);
      else ::unlink(p.c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

std::string ReadFile(const std::string& path) {
  UniqueFd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  std::string s;
  if (f.valid()) ReadAll(f.get(), 1 << 20, &s, nullptr);
  return s;
}

std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> r;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return r;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") r.push_back(n);
  }
  ::closedir(d);
  return r;
}

// Deterministic valid UTF-8 with every kind of code point (no surrogates).
std::string RandomUtf8(uint32_t* seed, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    *seed = *seed * 1664525u + 1013904223u;
    uint32_t r = *seed >> 8;
    uint32_t cp;
    switch (r % 5) {
      case 0: cp = r % 0x80; break;
      case 1: cp = 0x80 + r % (0x800 - 0x80); break;
      case 2: cp = 0x800 + r % (0xD800 - 0x800); break;
      case 3: cp = 0xE000 + r % (0x10000 - 0xE000); break;
      default: cp = 0x10000 + r % (0x110000 - 0x10000); break;
    }
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return s;
}

const char kGood[] =
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: application/json\r\n"
    "X-Podwire-Cni-Exit: 0\r\n"
    "Content-Length: 18\r\n"
    "Date: Mon, 01 Dec 2026 11:00:00 GMT\r\n"
    "Connection: close\r\n"
    "\r\n"
    "{\"cniVersion\":\"1\"}";

}  // namespace

// ---------------------------------------------------------------- JSON reader

TEST(JsonValidatesEveryValueType) {
  CHECK(Valid(R"({"a":[1,-2.5e3,0,-0,1E+2,3.25e-1,true,false,null,"s",{},[]],"b":{"c":[[{}]]}})"));
  CHECK(Valid(" \t\r\n{ \"a\" : 1 } \n"));
  CHECK(Valid("\"just a string\""));
  CHECK(Valid("12"));
  CHECK(Valid("null"));
  CHECK(Valid("[]"));
  CHECK(Valid(R"(["\"\\\/\b\f\n\r\t\u0000\uD83D\uDE00\ud800"])"));  // lone surrogates are legal JSON
  CHECK(Valid("\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\""));
}

TEST(JsonRejectsMalformedText) {
  const char* bad[] = {
      "", " ", "{", "}", "[1,]", "[,1]", "{\"a\":}", "{\"a\" 1}", "{\"a\":1,}", "{,}", "{'a':1}", "{a:1}",
      "01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "NaN", "Infinity", "tru", "nul", "falsy", "\"abc",
      "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "{}x", "{} {}", "[1 2]", "\"\x01\"", "\"a\nb\"", "\"\xFF\"",
      "\"\xC0\xAF\"", "\"\xE0\x80\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"", "\"\xC3\"",
      "\xEF\xBB\xBF{}", "[\"a\"\"b\"]", "{\"a\":1 \"b\":2}", "\"\\", "[1]]",
  };
  for (const char* b : bad) {
    if (Valid(b)) std::printf("  accepted: %s\n", b);
    CHECK(!Valid(b));
  }
  CHECK(!Valid(std::string_view("\"a\0b\"", 5)));  // a raw NUL is a control character
  JsonError e;
  CHECK(!JsonValidate("{\"a\": tru}", &e));
  CHECK_EQ(e.offset, size_t{6});
  CHECK_EQ(e.what, std::string("invalid literal"));
}

TEST(JsonNestingIsBounded) {
  std::string ok(kMaxJsonDepth, '['), close(kMaxJsonDepth, ']');
  CHECK(Valid(ok + close));
  std::string deep(kMaxJsonDepth + 1, '['), deep_close(kMaxJsonDepth + 1, ']');
  JsonError e;
  CHECK(!JsonValidate(deep + deep_close, &e));
  CHECK_EQ(e.what, std::string("nested too deeply"));
  std::string objs;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objs += "{\"a\":";
  CHECK(!Valid(objs + "1" + std::string(kMaxJsonDepth + 1, '}')));
  std::string huge(1 << 20, '[');  // a megabyte of '[' fails fast, no stack overflow
  CHECK(!Valid(huge));
}

TEST(JsonUnquoteDecodesEscapes) {
  CHECK_EQ(Unq(R"("a\"b\\c\/d\b\f\n\r\t")"), std::string("a\"b\\c/d\b\f\n\r\t"));
  CHECK_EQ(Unq(R"("\u00e9\u20AC")"), std::string("\xC3\xA9\xE2\x82\xAC"));
  CHECK_EQ(Unq(R"("\u0000")"), std::string("\0", 1));
  CHECK_EQ(Unq(R"("\ud83d\ude00")"), std::string("\xF0\x9F\x98\x80"));      // surrogate pair
  CHECK_EQ(Unq(R"("\uD83D\uDE00x")"), std::string("\xF0\x9F\x98\x80x"));    // upper-case hex
  CHECK_EQ(Unq(R"("\uDBFF\uDFFF")"), std::string("\xF4\x8F\xBF\xBF"));      // U+10FFFF
  CHECK_EQ(Unq(R"("\ud83d")"), std::string("\xEF\xBF\xBD"));                // lone high → U+FFFD
  CHECK_EQ(Unq(R"("\ud83dx")"), std::string("\xEF\xBF\xBDx"));
  CHECK_EQ(Unq(R"("\ud83d\u0041")"), std::string("\xEF\xBF\xBD" "A"));      // high + non-low
  CHECK_EQ(Unq(R"("\ud83d\ud83d\ude00")"), std::string("\xEF\xBF\xBD\xF0\x9F\x98\x80"));
  CHECK_EQ(Unq(R"("\ude00")"), std::string("\xEF\xBF\xBD"));                // lone low
  CHECK_EQ(Unq("\"raw \xF0\x9F\x98\x80\""), std::string("raw \xF0\x9F\x98\x80"));
  CHECK(Unq(R"("\ud83d\u12")").rfind("<error", 0) == 0);
  CHECK(Unq(R"("a" )").rfind("<error", 0) == 0);
  CHECK(Unq(R"(x)").rfind("<error", 0) == 0);
}

// ---------------------------------------------------------------- quoter

TEST(JsonStringEscapesLikeJsonStringify) {
  CHECK_EQ(JsonString("plain"), std::string("\"plain\""));
  CHECK_EQ(JsonString("q\"b\\s/"), std::string("\"q\\\"b\\\\s/\""));
  CHECK_EQ(JsonString("\b\f\n\r\t"), std::string("\"\\b\\f\\n\\r\\t\""));
  CHECK_EQ(JsonString(std::string_view("\0\x01\x1f\x7f", 4)), std::string("\"\\u0000\\u0001\\u001f\x7f\""));
  CHECK_EQ(JsonString("\xC3\xA9\xE2\x80\xA8\xF0\x9F\x98\x80"), std::string("\"\xC3\xA9\xE2\x80\xA8\xF0\x9F\x98\x80\""));
  // Ill-formed UTF-8 never reaches the output: U+FFFD per bad byte.
  CHECK_EQ(JsonString("a\xFF" "b\xC3"), std::string("\"a\\ufffdb\\ufffd\""));
  CHECK_EQ(JsonString("\xED\xA0\x80"), std::string("\"\\ufffd\\ufffd\\ufffd\""));
  CHECK(IsValidUtf8(JsonString("\xF8\x88\x80\x80\x80\xC0\xAF")));
  CHECK(Valid(JsonString("\xFF\xFE")));
}

TEST(JsonStringRoundTrips) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  CHECK_EQ(Unq(JsonString(all)), all);
  uint32_t seed = 12345;
  for (int i = 0; i < 2000; ++i) {
    std::string s = RandomUtf8(&seed, static_cast<size_t>(i % 40));
    CHECK(IsValidUtf8(s));
    std::string q = JsonString(s);
    CHECK(Valid(q));
    CHECK_EQ(Unq(q), s);
  }
  CHECK(!IsValidUtf8("\xC3"));
  CHECK(!IsValidUtf8("\xE2\x82"));
  CHECK(!IsValidUtf8("\xF5\x80\x80\x80"));
  CHECK(IsValidUtf8(""));
}

// ---------------------------------------------------------------- config

TEST(ConfigDefaults) {
  Config c;
  ConfigError e;
  CHECK(Cfg("{}", &c, &e));
  CHECK(!c.cni_version);
  CHECK_EQ(c.run_dir, std::string("/var/run/istio-cni"));
  CHECK(c.exclude_namespaces.empty());
  CHECK_EQ(c.pod_namespace, std::string(""));
  CHECK_EQ(c.agent_wait_ms, int64_t{10000});
  CHECK_EQ(c.agent_timeout_ms, int64_t{30000});
  CHECK(!c.status_always_ok);
  CHECK(!c.prev_result);
  CHECK_EQ(SocketPath(c), std::string("/var/run/istio-cni/pluginevent.sock"));
  CHECK_EQ(std::string(ConfigCniVersion(&c)), std::string("1.1.0"));
  CHECK_EQ(std::string(ConfigCniVersion(nullptr)), std::string("1.1.0"));
}

TEST(ConfigReadsTopLevelFieldsAndSkipsTheRest) {
  const std::string text = R"({
    "cniVersion": "1.0.0", "name": "k8s-pod-network", "type": "istio-cni",
    "unknown_obj": {"cni_agent_run_dir": "/nested/ignored", "x": [1, {"y": "}]\"{"}], "z": null},
    "unknown_arr": [[], [[]], {"a": -1.5e-3}, "prevResult", true, false, null],
    "unknown_num": -0.0e+0, "unknown_bool": true, "unknown_null": null, "unknown_str": "\u005c\"",
    "cni_agent_run_dir": "/run/podwire/",
    "exclude_namespaces": ["kube-system", "istio-system", "caf\u00e9"],
    "pod_namespace": "istio-system",
    "agent_wait_ms": 250, "agent_timeout_ms": 1500,
    "status_always_ok": true,
    "prevResult" :  { "cniVersion": "1.0.0" , "ips" : [ {"address": "10.0.0.5/24"} ], "s": "}\"" } ,
    "tail": "end"
  })";
  Config c;
  ConfigError e;
  CHECK(Cfg(text, &c, &e));
  CHECK(c.cni_version && *c.cni_version == "1.0.0");
  CHECK_EQ(c.run_dir, std::string("/run/podwire"));
  CHECK_EQ(SocketPath(c), std::string("/run/podwire/pluginevent.sock"));
  CHECK_EQ(c.exclude_namespaces.size(), size_t{3});
  if (c.exclude_namespaces.size() == 3) CHECK_EQ(c.exclude_namespaces[2], std::string("caf\xC3\xA9"));
  CHECK_EQ(c.pod_namespace, std::string("istio-system"));
  CHECK_EQ(c.agent_wait_ms, int64_t{250});
  CHECK_EQ(c.agent_timeout_ms, int64_t{1500});
  CHECK(c.status_always_ok);
  CHECK(c.prev_result &&
        *c.prev_result == R"({ "cniVersion": "1.0.0" , "ips" : [ {"address": "10.0.0.5/24"} ], "s": "}\"" })");
}

TEST(ConfigKeysAreDecodedDuplicatesLastWinsNullIsUnset) {
  Config c;
  ConfigError e;
  CHECK(Cfg(R"({"cni\u005fagent_run_dir":"/x","agent_wait_ms":5,"agent_wait_ms":6})", &c, &e));
  CHECK_EQ(c.run_dir, std::string("/x"));
  CHECK_EQ(c.agent_wait_ms, int64_t{6});
  CHECK(Cfg(R"({"exclude_namespaces":["a","b"],"exclude_namespaces":["c"],"prevResult":{"a":1},"prevResult":{}})", &c, &e));
  CHECK_EQ(c.exclude_namespaces.size(), size_t{1});
  CHECK(c.prev_result && *c.prev_result == "{}");
  CHECK(Cfg(R"({"cniVersion":"1.0.0","cniVersion":null,"cni_agent_run_dir":"/y","cni_agent_run_dir":null,)"
            R"("exclude_namespaces":null,"agent_wait_ms":1,"agent_wait_ms":null,"status_always_ok":true,)"
            R"("status_always_ok":null,"prevResult":{},"prevResult":null,"pod_namespace":null})",
            &c, &e));
  CHECK(!c.cni_version);
  CHECK_EQ(c.run_dir, std::string("/var/run/istio-cni"));
  CHECK(c.exclude_namespaces.empty());
  CHECK_EQ(c.agent_wait_ms, int64_t{10000});
  CHECK(!c.status_always_ok);
  CHECK(!c.prev_result);
  CHECK(Cfg(R"({"cni_agent_run_dir":"/"})", &c, &e));
  CHECK_EQ(SocketPath(c), std::string("/pluginevent.sock"));
  CHECK(Cfg(R"({"agent_wait_ms":0,"agent_timeout_ms":3600000,"exclude_namespaces":[]})", &c, &e));
  CHECK_EQ(c.agent_wait_ms, int64_t{0});
  CHECK_EQ(c.agent_timeout_ms, int64_t{3600000});
}

TEST(ConfigErrorsAreCode6ForJsonAnd7ForShape) {
  CHECK_EQ(CfgErrCode(""), kErrDecode);
  CHECK_EQ(CfgErrCode("{"), kErrDecode);
  CHECK_EQ(CfgErrCode("{\"cniVersion\":\"1.0.0\",}"), kErrDecode);
  CHECK_EQ(CfgErrCode("{\"a\":\"\xFF\"}"), kErrDecode);
  CHECK_EQ(CfgErrCode("{} trailing"), kErrDecode);
  // Valid JSON that does not decode into a configuration (not an object, a prevResult that is not one): 6.
  for (const char* s : {"[]", "\"x\"", "null", "1", R"({"prevResult":[]})", R"({"prevResult":"{}"})"}) CHECK_EQ(CfgErrCode(s), kErrDecode);
  const char* shape[] = {
      R"({"cniVersion":1})", R"({"cniVersion":{}})", R"({"pod_namespace":[]})",
      R"({"exclude_namespaces":"kube-system"})", R"({"exclude_namespaces":[1]})", R"({"exclude_namespaces":["a",null]})",
      R"({"agent_wait_ms":1.5})", R"({"agent_wait_ms":1e3})", R"({"agent_wait_ms":-1})", R"({"agent_wait_ms":"10"})",
      R"({"agent_wait_ms":3600001})", R"({"agent_wait_ms":10000000000000000})", R"({"agent_timeout_ms":0})",
      R"({"agent_timeout_ms":true})", R"({"status_always_ok":"true"})", R"({"status_always_ok":1})",
      R"({"cni_agent_run_dir":"relative/dir"})",
      R"({"cni_agent_run_dir":""})", R"({"cni_agent_run_dir":"/a\u0000b"})", R"({"cni_agent_run_dir":7})",
  };
  for (const char* s : shape) {
    int code = CfgErrCode(s);
    if (code != kErrInvalidConfig) std::printf("  %s -> %d\n", s, code);
    CHECK_EQ(code, kErrInvalidConfig);
  }
  Config c;
  ConfigError e;
  CHECK(!Cfg(R"({"agent_wait_ms":"10"})", &c, &e));
  CHECK(e.msg.find("agent_wait_ms") != std::string::npos);
  CHECK(!Cfg("{\"a\":", &c, &e));
  CHECK(e.msg.find("not valid JSON") != std::string::npos);
}

// ---------------------------------------------------------------- CNI_ARGS

TEST(CniArgsParseInAnyOrder) {
  CniArgs a;
  std::string err;
  CHECK(ParseCniArgs("", &a, &err));
  CHECK(!a.pod_name && !a.pod_namespace && !a.pod_uid && !a.infra_container_id);
  CHECK(ParseCniArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;"
                     "K8S_POD_INFRA_CONTAINER_ID=0123abc;K8S_POD_UID=5f0c-11",
                     &a, &err));
  CHECK(a.pod_name && *a.pod_name == "web-0");
  CHECK(a.pod_namespace && *a.pod_namespace == "default");
  CHECK(a.pod_uid && *a.pod_uid == "5f0c-11");
  CHECK(a.infra_container_id && *a.infra_container_id == "0123abc");
  CHECK(ParseCniArgs("K8S_POD_UID=u;K8S_POD_NAME=a=b;Other=x;K8S_POD_NAMESPACE=", &a, &err));
  CHECK(a.pod_name && *a.pod_name == "a=b");  // the value is everything after the first '='
  CHECK(a.pod_namespace && a.pod_namespace->empty());
  CHECK(!a.infra_container_id);
  CHECK(ParseCniArgs("K8S_POD_NAME=one;K8S_POD_NAME=two;k8s_pod_namespace=lower", &a, &err));
  CHECK(a.pod_name && *a.pod_name == "two");
  CHECK(!a.pod_namespace);  // keys are case-sensitive
}

TEST(CniArgsRejectPairsWithoutEquals) {
  CniArgs a;
  std::string err;
  for (const char* bad : {"K8S_POD_NAME", "a=b;", ";a=b", "a=b;;c=d", ";", "K8S_POD_NAME=x;junk"}) {
    err.clear();
    CHECK(!ParseCniArgs(bad, &a, &err));
    CHECK(err.find("invalid pair") != std::string::npos);
    CHECK(!a.pod_name);  // nothing half-parsed
  }
}

// ---------------------------------------------------------------- environment + request

TEST(CollectCniEnvTakesCniVariablesInOrder) {
  const char* envp[] = {"PATH=/usr/bin", "CNI_COMMAND=ADD", "CNI_NETNS=", "HOME=/root", "CNI_ARGS=a=b",
                        "CNI_COMMAND=DEL", "CNIX=1", "CNI_IFNAME=eth0", nullptr};
  std::vector<EnvVar> env;
  std::string err;
  CHECK(CollectCniEnv(envp, &env, &err));
  CHECK_EQ(env.size(), size_t{4});
  if (env.size() == 4) {
    CHECK_EQ(env[0].name, std::string("CNI_COMMAND"));
    CHECK_EQ(env[0].value, std::string("ADD"));  // first wins, like getenv
    CHECK_EQ(env[1].name, std::string("CNI_NETNS"));
    CHECK_EQ(env[1].value, std::string(""));
    CHECK_EQ(env[3].name, std::string("CNI_IFNAME"));
  }
  CHECK(FindEnv(env, "CNI_ARGS") && FindEnv(env, "CNI_ARGS")->value == "a=b");
  CHECK(!FindEnv(env, "PATH"));
}

TEST(CollectCniEnvEnforcesTheLimits) {
  std::string at_cap = "CNI_ARGS=" + std::string(kMaxEnvValue, 'x');
  std::string over = "CNI_ARGS=" + std::string(kMaxEnvValue + 1, 'x');
  std::vector<EnvVar> env;
  std::string err;
  const char* ok[] = {at_cap.c_str(), nullptr};
  CHECK(CollectCniEnv(ok, &env, &err));
  const char* big[] = {over.c_str(), nullptr};
  CHECK(!CollectCniEnv(big, &env, &err));
  CHECK(err.find("CNI_ARGS") != std::string::npos && err.find("65536") != std::string::npos);
  const char* bad_utf8[] = {"CNI_NETNS=/proc/\xFF", nullptr};
  CHECK(!CollectCniEnv(bad_utf8, &env, &err));
  CHECK(err.find("UTF-8") != std::string::npos);
  // The rest is still collected (CNI_COMMAND after a bad variable is known); the first problem is reported.
  const char* mixed[] = {over.c_str(), "CNI_NETNS=\xC3", "CNI_COMMAND=VERSION", "CNI_ARGS=later-duplicate", nullptr};
  err.clear();
  CHECK(!CollectCniEnv(mixed, &env, &err));
  CHECK(err.find("CNI_ARGS is 65537 bytes") == 0);
  CHECK_EQ(env.size(), size_t{1});
  CHECK(FindEnv(env, "CNI_COMMAND") && FindEnv(env, "CNI_COMMAND")->value == "VERSION");
  CHECK(!FindEnv(env, "CNI_ARGS"));
}

TEST(RequestIsExactlyTheProtocol) {
  std::vector<EnvVar> env = {{"CNI_COMMAND", "ADD"}, {"CNI_NETNS", ""}, {"CNI_ARGS", "K8S_POD_NAME=a\"b"}};
  std::string body = BuildRequestBody("ADD", env, "{\"cniVersion\":\"1.0.0\",\n\t\"x\":\"\\u00e9\"}");
  CHECK_EQ(body, std::string(R"({"command":"ADD","env":{"CNI_COMMAND":"ADD","CNI_NETNS":"","CNI_ARGS":"K8S_POD_NAME=a\"b"},)"
                             R"("config":"{\"cniVersion\":\"1.0.0\",\n\t\"x\":\"\\u00e9\"}"})"));
  CHECK(Valid(body));
  CHECK_EQ(BuildRequestHead(42), std::string("POST /v1/cni HTTP/1.1\r\nHost: podwire\r\nContent-Type: application/json\r\n"
                                             "Content-Length: 42\r\nConnection: close\r\n\r\n"));
  CHECK_EQ(BuildRequestBody("GC", {}, ""), std::string(R"({"command":"GC","env":{},"config":""})"));
}

// ---------------------------------------------------------------- response

TEST(ResponseGood) {
  std::string buf = kGood;
  Response r = Parse(buf);
  CHECK(r.kind == Response::Kind::kDone);
  CHECK_EQ(r.status, 200);
  CHECK_EQ(r.exit_code, 0);
  CHECK_EQ(Body(buf, r), std::string("{\"cniVersion\":\"1\"}"));
  // Names are case-insensitive, OWS is trimmed, HTTP/1.0 and an empty reason are fine.
  std::string b2 = "HTTP/1.0 200 \r\nx-podwire-cni-exit:\t1 \r\ncontent-length:  3\r\n\r\nabc";
  r = Parse(b2);
  CHECK(r.kind == Response::Kind::kDone);
  CHECK_EQ(r.exit_code, 1);
  CHECK_EQ(Body(b2, r), std::string("abc"));
  std::string b3 = "HTTP/1.1 200\r\nContent-Length: 0\r\nX-Podwire-Cni-Exit: 255\r\nContent-Length: 0\r\n\r\n";
  r = Parse(b3);
  CHECK(r.kind == Response::Kind::kDone);
  CHECK_EQ(r.exit_code, 255);
  CHECK_EQ(r.body_len, size_t{0});
  // Bytes past the body are not looked at (the shim stops reading there).
  r = Parse(buf + "HTTP/1.1 500 extra");
  CHECK(r.kind == Response::Kind::kDone);
  CHECK_EQ(Body(buf, r), std::string("{\"cniVersion\":\"1\"}"));
}

TEST(ResponseTruncatedNeedsMoreThenFailsAtEof) {
  std::string buf = kGood;
  for (size_t n = 0; n < buf.size(); ++n) {
    std::string_view p(buf.data(), n);
    Response r = Parse(p, false);
    CHECK(r.kind == Response::Kind::kNeedMore);
    Response e = Parse(p, true);
    CHECK(e.kind == Response::Kind::kError);
  }
  CHECK_EQ(Parse("", true).error, std::string("the agent closed the connection without an answer"));
  CHECK(Parse("HTTP/1.1 200 OK", true).error.find("truncated status line") == 0);
  CHECK_EQ(Parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", true).error, std::string("truncated headers"));
  Response r = Parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-Podwire-Cni-Exit: 0\r\n\r\nabc", true);
  CHECK_EQ(r.error, std::string("truncated body (3 of 10 bytes)"));
  // Head complete, body partial: the parser says how much it needs.
  std::string part = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nX-Podwire-Cni-Exit: 0\r\n\r\nabc";
  r = Parse(part, false);
  CHECK(r.kind == Response::Kind::kNeedMore);
  CHECK_EQ(r.body_offset + r.body_len, part.size() + 7);
}

TEST(ResponseOversized) {
  std::string head = "HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: ";
  Response r = Parse(head + std::to_string(kMaxResponseBody + 1) + "\r\n\r\n");
  CHECK(r.kind == Response::Kind::kError);
  CHECK_EQ(r.error, std::string("body of 1048577 bytes, over the 1048576-byte limit"));
  std::string max = head + std::to_string(kMaxResponseBody) + "\r\n\r\n" + std::string(kMaxResponseBody, 'x');
  r = Parse(max);
  CHECK(r.kind == Response::Kind::kDone);
  CHECK_EQ(r.body_len, kMaxResponseBody);
  CHECK(Parse(head + "99999999999999999999\r\n\r\n").kind == Response::Kind::kError);  // 20 digits
  // A head that never ends (or whose status line never ends) stops at 64 KiB.
  std::string long_head = "HTTP/1.1 200 OK\r\nX-Filler: " + std::string(kMaxResponseHead, 'a');
  r = Parse(long_head);
  CHECK(r.kind == Response::Kind::kError);
  CHECK_EQ(r.error, std::string("response head over 65536 bytes"));
  const std::string sl = "HTTP/1.1 200 ";
  CHECK(Parse(sl + std::string(kMaxResponseHead + 1 - sl.size(), 'H')).kind == Response::Kind::kError);
  CHECK(Parse(sl + std::string(kMaxResponseHead - sl.size(), 'H')).kind == Response::Kind::kNeedMore);
  // Bytes that can never begin a status line are an error at once, quoted up to the first wrong one.
  CHECK_EQ(Parse("HTTP/2 200").error, std::string("bad status line \"HTTP/2\""));
  CHECK_EQ(Parse("HTTP/1.1 20x OK\r\n").error, std::string("bad status line \"HTTP/1.1 20x\""));
  ResponseLimits small{64, 4};
  CHECK(ParseResponse("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: 5\r\n\r\nhello", false, small).kind ==
        Response::Kind::kError);
}

TEST(ResponseMissingOrBadHeaders) {
  auto err = [](std::string_view s) { return Parse(s).error; };
  CHECK_EQ(err("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), std::string("no X-Podwire-Cni-Exit header"));
  CHECK_EQ(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\n\r\n"), std::string("no Content-Length header"));
  CHECK(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            .find("Transfer-Encoding \"chunked\" is not accepted") == 0);
  for (const char* v : {"256", "-1", "abc", "", "1 2", "0x1", "0000", "0000000000000012026", "99999999999"}) {
    std::string s = std::string("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Podwire-Cni-Exit: ") + v + "\r\n\r\n";
    CHECK(err(s).find("bad X-Podwire-Cni-Exit") == 0);
  }
  for (const char* v : {"-1", "1.0", "", "+5", "5 5"}) {
    std::string s = std::string("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: ") + v + "\r\n\r\n";
    CHECK(err(s).find("bad Content-Length") == 0);
  }
  CHECK_EQ(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
           std::string("conflicting Content-Length headers"));
  CHECK_EQ(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nX-Podwire-Cni-Exit: 1\r\nContent-Length: 0\r\n\r\n"),
           std::string("conflicting X-Podwire-Cni-Exit headers"));
  CHECK(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nContent-Length: 0\r\n folded\r\n\r\n").find("bad header line") == 0);
  CHECK(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\r\nNoColon\r\nContent-Length: 0\r\n\r\n").find("bad header line") == 0);
  CHECK(err("HTTP/1.1 200 OK\r\nX-Podwire-Cni-Exit: 0\nContent-Length: 0\r\n\r\n") == "bare CR or LF in a header line");
  CHECK(err("HTTP/1.1 200 OK\r\n: empty name\r\n\r\n").find("bad header line") == 0);
}

TEST(ResponseBadStatus) {
  auto r = Parse("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom");
  CHECK(r.kind == Response::Kind::kError);
  CHECK_EQ(r.error, std::string("unexpected status \"500 Internal Server Error\""));
  CHECK(Parse("HTTP/1.1 404 Not Found\r\n").kind == Response::Kind::kError);  // decided at the status line
  CHECK(Parse("HTTP/1.1 413 Payload Too Large\r\n").error.find("413") != std::string::npos);
  for (const char* s : {"HTTP/2 200 OK\r\n", "HTP/1.1 200 OK\r\n", "HTTP/1.1 20 OK\r\n", "HTTP/1.1 2000 OK\r\n",
                        "garbage\r\n", "\r\n", "HTTP/1.1  200 OK\r\n", "HTTP/1.x 200 OK\r\n", "http/1.1 200 OK\r\n",
                        "HTTP/1.1 200 O\x01K\r\n"}) {
    Response b = Parse(s);
    CHECK(b.kind == Response::Kind::kError);
    CHECK(b.error.find("bad status line") == 0);
  }
  // 503: retry, as soon as the status line is complete, whatever follows.
  CHECK(Parse("HTTP/1.1 503 Service Unavailable\r\n").kind == Response::Kind::kRetry);
  CHECK(Parse("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 21\r\n\r\nnode agent not ready\n").kind ==
        Response::Kind::kRetry);
  CHECK(Parse("HTTP/1.1 503 Service Unavailable").kind == Response::Kind::kNeedMore);
}

// ---------------------------------------------------------------- unreachable

TEST(PassBeforeAgentIsUpstreamsEarlyExits) {
  Config cfg;
  ConfigError ce;
  CHECK(ParseConfig(R"({"cniVersion":"0.4.0","exclude_namespaces":["kube-system"],"pod_namespace":"istio-system"})", &cfg,
                    &ce));
  auto args = [](const char* s) {
    CniArgs a;
    std::string e;
    CHECK(ParseCniArgs(s, &a, &e));
    return a;
  };
  struct Row {
    const char* args;
    bool passes;
  };
  const Row rows[] = {
      {"K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-1", true},
      {"K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istio-cni-node-x7k2p", true},
      {"", true},
      {"K8S_POD_NAME=web-0", true},
      {"K8S_POD_NAMESPACE=;K8S_POD_NAME=web-0", true},
      {"K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0", false},
      {"K8S_POD_NAMESPACE=default;K8S_POD_NAME=istio-cni-node-x7k2p", false},  // the prefix elsewhere
      {"K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istiod-1", false},
  };
  for (const Row& row : rows) {
    bool passes = PassBeforeAgent(cfg, args(row.args)) != nullptr;
    if (passes != row.passes) std::printf("  row \"%s\": passes %d\n", row.args, passes);
    CHECK(passes == row.passes);
  }
  // pod_namespace unset: no pod is the agent's.
  Config bare;
  CHECK(ParseConfig(R"({"cniVersion":"1.0.0"})", &bare, &ce));
  CHECK(PassBeforeAgent(bare, args("K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istio-cni-node-x")) == nullptr);
}

TEST(PassThroughPrintsUpstreamsResultOrFails) {
  Config cfg;
  ConfigError ce;
  CHECK(ParseConfig(R"({"cniVersion":"1.0.0"})", &cfg, &ce));
  PassResult p = PassThrough(cfg);
  CHECK(p.ok);
  CHECK_EQ(p.stdout_text, std::string("{\n    \"cniVersion\": \"1.0.0\"\n}"));  // no "dns":{} (the old text had it)
  CHECK(ParseConfig(R"({"cniVersion":"0.3.1"})", &cfg, &ce));
  CHECK_EQ(PassThrough(cfg).stdout_text, std::string("{\n    \"cniVersion\": \"0.3.1\",\n    \"dns\": {}\n}"));
  CHECK(ParseConfig(R"({"cniVersion":"1.0.0","prevResult":{"cniVersion":"0.4.0"}})", &cfg, &ce));
  p = PassThrough(cfg);
  CHECK(!p.ok && p.code == kErrDecode);
  CHECK(ParseConfig(R"({"name":"x"})", &cfg, &ce));
  CHECK_EQ(PassThrough(cfg).code, kErrInvalidConfig);
  CHECK(ParseConfig(R"({"cniVersion":"0.2.0"})", &cfg, &ce));
  CHECK_EQ(PassThrough(cfg).code, kErrIncompatibleVersion);
}

// Every case upstream printed (test/fixtures/cni-results/goldens.json, scripts/cni-goldens).
TEST(PassThroughMatchesUpstreamGoldens) {
  std::string text = ReadFile(std::string(PODWIRE_SOURCE_DIR) + "/test/fixtures/cni-results/goldens.json");
  JsonValue doc;
  JsonError je;
  CHECK(JsonParse(text, &doc, &je));
  const JsonValue* cases = doc.Get("cases");
  CHECK(cases && cases->items.size() > 400);
  if (!cases) return;
  int passed = 0, failed_as_upstream = 0;
  for (const auto& c : cases->items) {
    const std::string& name = c.Get("name")->text;
    Config cfg;
    ConfigError ce;
    CHECK(ParseConfig(c.Get("stdin")->text, &cfg, &ce));
    PassResult p = PassThrough(cfg);
    const JsonValue* want = c.Get("stdout");
    bool ok = want ? p.ok && p.stdout_text == want->text : !p.ok && p.code == kErrDecode;
    if (!ok) std::printf("  %s: got %s\n", name.c_str(), p.ok ? p.stdout_text.c_str() : p.msg.c_str());
    CHECK(ok);
    (want ? passed : failed_as_upstream)++;
  }
  CHECK(passed > 200 && failed_as_upstream > 100);
}

TEST(UnreachableDecisionTable) {
  Config cfg;
  ConfigError ce;
  CHECK(ParseConfig(R"({"cniVersion":"0.4.0","exclude_namespaces":["kube-system"],"pod_namespace":"istio-system"})", &cfg,
                    &ce));
  const std::string sock = "/var/run/istio-cni/pluginevent.sock";
  struct Row {
    const char* what;
    Command cmd;
    bool always_ok;
    Fallback action;
    int exit_code;
    int cni_code;  // 0: no error object
  };
  const Row rows[] = {
      {"ADD (nothing let it pass)", Command::kAdd, false, Fallback::kFailTryLater, 1, 11},
      {"DEL", Command::kDel, false, Fallback::kQueueDel, 0, 0},
      {"CHECK", Command::kCheck, false, Fallback::kFailTryLater, 1, 11},
      {"GC", Command::kGc, false, Fallback::kFailTryLater, 1, 11},
      {"STATUS", Command::kStatus, false, Fallback::kFailNotAvailable, 1, 50},
      {"STATUS always ok", Command::kStatus, true, Fallback::kStatusOk, 0, 0},
  };
  for (const Row& row : rows) {
    Config c = cfg;
    c.status_always_ok = row.always_ok;
    FallbackDecision d = DecideUnreachable(row.cmd, c, sock, "no socket there");
    bool ok = d.action == row.action && d.exit_code == row.exit_code;
    if (row.cni_code) {
      std::string want = R"({"cniVersion":"0.4.0","code":)" + std::to_string(row.cni_code) +
                         R"(,"msg":"podwire: node agent not reachable at /var/run/istio-cni/pluginevent.sock","details":"no socket there;)";
      ok = ok && d.stdout_text.rfind(want, 0) == 0 && Valid(d.stdout_text);
    } else {
      ok = ok && d.stdout_text.empty();
    }
    if (!ok) std::printf("  row \"%s\": action %d exit %d stdout %s\n", row.what, static_cast<int>(d.action), d.exit_code,
                         d.stdout_text.c_str());
    CHECK(ok);
    CHECK(!d.note.empty());
  }
  Config bare;
  CHECK(ParseConfig(R"({"exclude_namespaces":["kube-system"]})", &bare, &ce));
  CHECK(DecideUnreachable(Command::kAdd, bare, sock, "x").stdout_text.rfind(R"({"cniVersion":"1.1.0","code":11,)", 0) == 0);
}

TEST(VersionReplyComesFromTheConstants) {
  CHECK_EQ(VersionReply(),
           std::string(R"({"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]})"));
}

TEST(PodAnnotationsFromRuntimeConfig) {
  Config c;
  ConfigError ce;
  CHECK(ParseConfig(R"({"cniVersion":"1.0.0","runtimeConfig":{"io.kubernetes.cri.pod-annotations":)"
                    R"({"sidecar.istio.io/status":"{}","a":"b"}}})",
                    &c, &ce));
  CHECK(c.pod_annotation_keys.has_value());
  CHECK(SidecarAnnotated(c));
  CHECK(ParseConfig(R"({"cniVersion":"1.0.0","runtimeConfig":{"io.kubernetes.cri.pod-annotations":{"a":"b"}}})", &c, &ce));
  CHECK(c.pod_annotation_keys.has_value() && !SidecarAnnotated(c));
  // Not there, or not an object: no annotations (never an error: the agent owns runtimeConfig).
  for (const char* t : {R"({"cniVersion":"1.0.0"})", R"({"runtimeConfig":[1]})", R"({"runtimeConfig":{"x":1}})",
                        R"({"runtimeConfig":{"io.kubernetes.cri.pod-annotations":"sidecar.istio.io/status"}})"}) {
    CHECK(ParseConfig(t, &c, &ce));
    CHECK(!c.pod_annotation_keys.has_value() && !SidecarAnnotated(c));
  }
}

// ---------------------------------------------------------------- decision file

const char kDecisionFile[] =
    R"({"version":1,"generation":7,"writtenAtMs":1764636000000,"node":"node-a",)"
    R"("excludeNamespaces":["kube-system"],"meshNamespaces":["payments","shop"],)"
    R"("pods":[{"namespace":"shop","name":"batch-1","uid":"u-batch","mesh":false},)"
    R"({"namespace":"shop","name":"web-0","uid":"u-web","mesh":true},)"
    R"({"namespace":"plain","name":"app-1","uid":"u-app","mesh":false}]})";

TEST(DecisionFileParsesStrictly) {
  DecisionFile f;
  std::string err;
  CHECK(ParseDecisionFile(kDecisionFile, &f, &err));
  CHECK_EQ(f.generation, int64_t{7});
  CHECK_EQ(f.written_at_ms, int64_t{1764636000000});
  CHECK_EQ(f.node, std::string("node-a"));
  CHECK_EQ(f.mesh_namespaces.size(), size_t{2});
  CHECK_EQ(f.pods.size(), size_t{3});
  CHECK(f.pods[1].mesh && f.pods[1].uid == "u-web");
  const std::string base = kDecisionFile;
  auto bad = [&](std::string text) {
    DecisionFile g;
    std::string e;
    bool ok = ParseDecisionFile(text, &g, &e);
    if (ok) std::printf("  accepted: %s\n", text.c_str());
    return !ok && !e.empty();
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    size_t at = t.find(from);
    CHECK(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  CHECK(bad(replace(R"("version":1)", R"("version":2)")));
  CHECK(bad(replace(R"("version":1)", R"("version":"1")")));
  CHECK(bad(replace(R"("version":1,)", "")));
  CHECK(bad(replace(R"("generation":7)", R"("generation":-1)")));
  CHECK(bad(replace(R"("generation":7)", R"("generation":7.5)")));
  CHECK(bad(replace(R"("node":"node-a",)", R"("node":"node-a","node":"b",)")));
  CHECK(bad(replace(R"("node":"node-a",)", R"("node":"node-a","extra":1,)")));
  CHECK(bad(replace(R"("node":"node-a",)", "")));
  CHECK(bad(replace(R"(["payments","shop"])", R"(["payments",1])")));
  CHECK(bad(replace(R"("mesh":false})", R"("mesh":0})")));
  CHECK(bad(replace(R"("mesh":false})", R"("mesh":false,"x":1})")));
  CHECK(bad(replace(R"("uid":"u-batch",)", "")));
  CHECK(bad(base.substr(0, base.size() - 1)));
  CHECK(bad("[]"));
  CHECK(bad(base + "x"));
}

TEST(DecisionFileRules) {
  DecisionFile f;
  std::string err;
  CHECK(ParseDecisionFile(kDecisionFile, &f, &err));
  CHECK(DecideFromFile(f, "shop", "web-0", "u-web") == FileRule::kPodMesh);
  CHECK(DecideFromFile(f, "shop", "web-0", "") == FileRule::kPodMesh);            // no K8S_POD_UID: the entry holds
  CHECK(DecideFromFile(f, "shop", "web-0", "u-new") == FileRule::kMeshNamespace);  // a recreated pod: entry ignored
  CHECK(DecideFromFile(f, "shop", "batch-1", "u-batch") == FileRule::kPodNoMesh);  // opted out in a mesh namespace
  CHECK(DecideFromFile(f, "shop", "unknown", "u") == FileRule::kMeshNamespace);
  CHECK(DecideFromFile(f, "plain", "app-1", "u-app") == FileRule::kPodNoMesh);
  CHECK(DecideFromFile(f, "plain", "app-1", "u-other") == FileRule::kPlainNamespace);
  CHECK(DecideFromFile(f, "other", "x", "") == FileRule::kPlainNamespace);
  CHECK(FileRulePasses(FileRule::kPodNoMesh) && FileRulePasses(FileRule::kPlainNamespace));
  CHECK(!FileRulePasses(FileRule::kPodMesh) && !FileRulePasses(FileRule::kMeshNamespace) &&
        !FileRulePasses(FileRule::kSidecarAnnotation));
}

TEST(DecisionFileReadRefusesWhatIsNotTheAgentsFile) {
  std::string root = TempDir();
  const std::string path = root + "/cni-decisions.json";
  int fds = OpenFds();
  auto write = [&](const std::string& p, const std::string& body, mode_t mode) {
    ::unlink(p.c_str());
    UniqueFd f(::open(p.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode));
    CHECK(f.valid() && WriteAll(f.get(), body));
    CHECK(::fchmod(f.get(), mode) == 0);
  };
  auto reads = [&](std::string* why = nullptr) {
    DecisionFile f;
    std::string err;
    bool ok = ReadDecisionFile(path, &f, &err, ::geteuid());
    if (why) *why = err;
    return ok;
  };
  std::string why;
  write(path, kDecisionFile, 0600);
  CHECK(reads());
  write(path, kDecisionFile, 0644);  // others may read it: fine
  CHECK(reads());
  write(path, kDecisionFile, 0602);
  CHECK(!reads(&why) && why.find("writable") != std::string::npos);
  write(path, kDecisionFile, 0620);
  CHECK(!reads());
  // Owned by someone else (the shim wants root; here: not the test's own uid).
  write(path, kDecisionFile, 0600);
  CHECK(::chown(path.c_str(), 4242, 4242) == 0);
  CHECK(!reads(&why) && why.find("uid 4242") != std::string::npos);
  // A symlink to a good file is not followed.
  write(root + "/real.json", kDecisionFile, 0600);
  ::unlink(path.c_str());
  CHECK(::symlink((root + "/real.json").c_str(), path.c_str()) == 0);
  CHECK(!reads(&why) && why.find("symlink") != std::string::npos);
  ::unlink(path.c_str());
  // A FIFO: O_NONBLOCK, so no hang; not a regular file.
  CHECK(::mkfifo(path.c_str(), 0600) == 0);
  CHECK(!reads(&why) && why.find("not a regular file") != std::string::npos);
  ::unlink(path.c_str());
  CHECK(::mkdir(path.c_str(), 0700) == 0);
  CHECK(!reads());
  ::rmdir(path.c_str());
  // Over 1 MiB (valid JSON all the same).
  std::string big = kDecisionFile;
  big.insert(big.size() - 1, std::string(kMaxDecisionFile, ' '));
  write(path, big, 0600);
  CHECK(!reads(&why) && why.find("over") != std::string::npos);
  // Another version; missing.
  std::string v2 = kDecisionFile;
  v2.replace(v2.find("\"version\":1"), 11, "\"version\":2");
  write(path, v2, 0600);
  CHECK(!reads(&why) && why.find("version") != std::string::npos);
  ::unlink(path.c_str());
  CHECK(!reads(&why) && why.find("No such file") != std::string::npos);
  CHECK_EQ(OpenFds(), fds);
  RemoveTree(root);
}

TEST(StdinReadIsBoundedInTime) {
  int p[2];
  CHECK(::pipe2(p, O_CLOEXEC) == 0);
  UniqueFd rd(p[0]), wr(p[1]);
  CHECK(WriteAll(wr.get(), "{\"cniVersion\":"));
  std::string out;
  int e = 0;
  int64_t t0 = MonotonicMs();
  CHECK(ReadAll(rd.get(), 1 << 20, &out, &e, 100) == ReadStatus::kTimeout);  // the writer never closes
  CHECK(MonotonicMs() - t0 >= 100);
  CHECK_EQ(out, std::string("{\"cniVersion\":"));
  wr.reset();
  CHECK(ReadAll(rd.get(), 1 << 20, &out, &e, 100) == ReadStatus::kOk);
}

TEST(CniErrorJsonShape) {
  CHECK_EQ(CniErrorJson("1.0.0", 7, "bad \"config\"", "line\n2"),
           std::string(R"({"cniVersion":"1.0.0","code":7,"msg":"bad \"config\"","details":"line\n2"})"));
}

// ---------------------------------------------------------------- DEL records

TEST(DelRecordNamesAndContent) {
  CHECK(DelRecordFileName(1700000000123, "abc") == std::optional<std::string>("1700000000123-abc.json"));
  CHECK(DelRecordFileName(1, "0a_b.c-d") == std::optional<std::string>("1-0a_b.c-d.json"));
  CHECK(DelRecordFileName(1, std::string(200, 'f')).has_value());
  for (std::string bad : {std::string(""), std::string("../x"), std::string("a/b"), std::string(".hidden"),
                          std::string("-x"), std::string("_x"), std::string("a b"), std::string(201, 'f'),
                          std::string("a\0b", 3), std::string("caf\xC3\xA9")}) {
    CHECK(!DelRecordFileName(1, bad));
  }
  CHECK(IsDelRecordName("1700000000123-abc.json"));
  CHECK(!IsDelRecordName(DelRecordTempName("1700000000123-abc.json", 42, 0)));
  CHECK_EQ(DelRecordTempName("1-a.json", 42, 3), std::string(".1-a.json.42.3.tmp"));
  CHECK(!IsDelRecordName(".x.json"));
  CHECK(!IsDelRecordName("x.json.tmp"));
  CHECK(!IsDelRecordName(".json"));
  CHECK(!IsDelRecordName("readme"));
  CHECK(DelQueueHasRoom(0));
  CHECK(DelQueueHasRoom(4095));
  CHECK(!DelQueueHasRoom(4096));

  DelRecord r{"abc", "/var/run/netns/cni-\"1\"", "eth0", "default", "web-0", "uid-1", 1700000000123};
  CHECK_EQ(DelRecordJson(r), std::string(R"({"containerId":"abc","netns":"/var/run/netns/cni-\"1\"","ifname":"eth0",)"
                                         R"("podNamespace":"default","podName":"web-0","podUid":"uid-1",)"
                                         R"("time":"2023-11-14T22:13:20.123Z"})" "\n"));
  CHECK_EQ(FormatIsoTimeMs(0), std::string("1970-01-01T00:00:00.000Z"));
  CHECK_EQ(FormatIsoTimeMs(951782400000), std::string("2000-02-29T00:00:00.000Z"));
  CHECK_EQ(FormatIsoTimeMs(4102444799999), std::string("2099-12-31T23:59:59.999Z"));
  CHECK_EQ(FormatIsoTimeMs(1709164800001), std::string("2024-02-29T00:00:00.001Z"));
}

TEST(DelQueueWritesAtomicallyAndIsBounded) {
  ::umask(022);
  std::string root = TempDir();
  CHECK(!root.empty());
  std::string run = root + "/run";  // missing: made 0750, the queue 0700
  std::string q = run + "/cni-del-queue";
  int fds = OpenFds();
  DelRecord r{"c1", "/var/run/netns/x", "eth0", "ns", "pod", "uid", 1700000000123};
  QueueResult res = WriteDelRecord(run, r, 3);
  CHECK(res.status == QueueStatus::kWritten);
  CHECK_EQ(res.detail, q + "/1700000000123-c1.json");
  struct stat st;
  CHECK(::stat(run.c_str(), &st) == 0 && (st.st_mode & 07777) == 0750);
  CHECK(::stat(q.c_str(), &st) == 0 && (st.st_mode & 07777) == 0700);
  CHECK(::stat(res.detail.c_str(), &st) == 0 && (st.st_mode & 07777) == 0600);
  CHECK_EQ(ReadFile(res.detail), DelRecordJson(r));

  // Temp files and other names do not count; records do.
  UniqueFd(::open((q + "/.left-over.json.1.0.tmp").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  UniqueFd(::open((q + "/notes.txt").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  r.unix_ms++;
  CHECK(WriteDelRecord(run, r, 3).status == QueueStatus::kWritten);
  r.unix_ms++;
  CHECK(WriteDelRecord(run, r, 3).status == QueueStatus::kWritten);
  r.unix_ms++;
  res = WriteDelRecord(run, r, 3);
  CHECK(res.status == QueueStatus::kFull);
  CHECK(res.detail.find("3 records") != std::string::npos);
  CHECK_EQ(List(q).size(), size_t{5});  // 3 records + the two others, no temp file of ours
  r.container_id = "../escape";
  CHECK(WriteDelRecord(run, r, 100).status == QueueStatus::kBadContainerId);
  CHECK_EQ(OpenFds(), fds);  // every fd closed
  RemoveTree(root);
}

TEST(DelQueueStopsAt4096Records) {
  std::string root = TempDir();
  std::string q = root + "/cni-del-queue";
  CHECK(::mkdir(q.c_str(), 0700) == 0);
  for (size_t i = 0; i < kDelQueueMax - 1; ++i) {
    UniqueFd(::open((q + "/" + std::to_string(i) + "-x.json").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  }
  DelRecord r{"last", "", "eth0", "", "", "", 1};
  CHECK(WriteDelRecord(root, r).status == QueueStatus::kWritten);  // the 4096th
  r.unix_ms = 2;
  CHECK(WriteDelRecord(root, r).status == QueueStatus::kFull);
  CHECK_EQ(List(q).size(), kDelQueueMax);
  RemoveTree(root);
}

TEST(DelQueueErrorsAreReported) {
  std::string root = TempDir();
  std::string file = root + "/plain";
  UniqueFd(::open(file.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
  DelRecord r{"c1", "", "eth0", "", "", "", 1};
  QueueResult res = WriteDelRecord(file, r);  // the run dir is a file
  CHECK(res.status == QueueStatus::kError);
  CHECK(res.detail.find(file) != std::string::npos);
  res = WriteDelRecord(root + "/no/such/parent", r);
  CHECK(res.status == QueueStatus::kError);
  RemoveTree(root);
}

// ---------------------------------------------------------------- agent client failure paths

TEST(AgentMissingIsRetriedUntilTheWaitBudget) {
  std::string root = TempDir();
  int fds = OpenFds();
  AgentCall call;
  call.socket_path = root + "/pluginevent.sock";
  call.request = "x";
  call.wait_ms = 250;
  int64_t t0 = MonotonicMs();
  AgentResult r = CallAgent(call);
  int64_t took = MonotonicMs() - t0;
  CHECK(r.kind == AgentResult::Kind::kUnreachable);
  CHECK(r.detail.find("No such file or directory") != std::string::npos);
  CHECK(r.detail.find("agent_wait_ms 250") != std::string::npos);
  CHECK(took >= 250 && took < 2000);
  CHECK(r.attempts >= 3 && r.attempts <= 4);  // t=0, 100, 200, 250
  call.wait_ms = 0;
  r = CallAgent(call);
  CHECK_EQ(r.attempts, 1);
  CHECK_EQ(OpenFds(), fds);
  RemoveTree(root);
}

TEST(AgentRefusingAndSilentAgents) {
  std::string root = TempDir();
  std::string path = root + "/pluginevent.sock";
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, path.data(), path.size());
  int fds = OpenFds();
  {
    // Bound, not listening: ECONNREFUSED, retried.
    UniqueFd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    CHECK(::bind(s.get(), reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0);
    AgentCall call;
    call.socket_path = path;
    call.request = "x";
    call.wait_ms = 120;
    AgentResult r = CallAgent(call);
    CHECK(r.kind == AgentResult::Kind::kUnreachable);
    CHECK(r.detail.find("Connection refused") != std::string::npos);
    CHECK(r.attempts >= 2);
    // Listening but never answering: connect works (backlog), then agent_timeout_ms, no retry.
    CHECK(::listen(s.get(), 8) == 0);
    call.timeout_ms = 150;
    int64_t t0 = MonotonicMs();
    r = CallAgent(call);
    int64_t took = MonotonicMs() - t0;
    CHECK(r.kind == AgentResult::Kind::kUnreachable);
    CHECK(r.detail.find("no complete answer within 150 ms") != std::string::npos);
    CHECK_EQ(r.attempts, 1);
    CHECK(took >= 150 && took < 2000);
  }
  CHECK_EQ(OpenFds(), fds);
  RemoveTree(root);
}

TEST_MAIN()
