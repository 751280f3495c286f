// podwire-cni: the CNI plugin the container runtime execs for every pod
// network operation. It forwards the invocation (CNI_* environment + stdin
// config) to the podwire node agent over <cni_agent_run_dir>/pluginevent.sock
// and relays the answer. It decides alone only what needs no agent: VERSION,
// the ADDs upstream passes before looking anything up, and — when the agent is
// down — the ADDs the agent's decision file shows cannot need the mesh; the
// rest fails closed, per command. The contract is docs/cni-protocol.md. A
// static executable: no loader, no libstdc++ to find.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cni-shim/config.h"
#include "cni-shim/decision_file.h"
#include "cni-shim/fallback.h"
#include "cni-shim/http_response.h"
#include "cni-shim/json.h"
#include "cni-shim/shim_io.h"

extern char** environ;

namespace {

using namespace podwire::cni;

// One line for the runtime's log (stderr is not part of the CNI result).
void Note(const std::string& line) {
  std::string l = "podwire-cni: " + line + "\n";
  WriteAll(STDERR_FILENO, l);
}

int Emit(const std::string& out, int code) {
  if (!out.empty() && !WriteAll(STDOUT_FILENO, out)) {
    Note("writing the result to stdout failed");
    return 1;
  }
  return code;
}

int Fail(const Config* cfg, int code, const std::string& msg, const std::string& details = "") {
  Note(msg + (details.empty() ? "" : ": " + details));
  return Emit(CniErrorJson(ConfigCniVersion(cfg), code, msg, details), 1);
}

// An ADD that passes without the agent: prevResult as upstream prints it.
int Pass(const Config& cfg, const std::string& why) {
  PassResult p = PassThrough(cfg);
  if (!p.ok) return Fail(&cfg, p.code, "podwire: " + p.msg, p.details);
  Note("ADD passed through without the agent: " + why);
  return Emit(p.stdout_text, 0);
}

// The agent is down for this ADD: the decision file's rules (docs/cni-protocol.md). True and
// *why when the pod cannot need the mesh; false (fail closed) otherwise, *why saying which rule.
bool FilePasses(const Config& cfg, const CniArgs* args, std::string* why) {
  if (!args) {
    *why = "CNI_ARGS do not parse";
    return false;
  }
  if (SidecarAnnotated(cfg)) {
    *why = FileRuleName(FileRule::kSidecarAnnotation);
    return false;
  }
  DecisionFile f;
  std::string err;
  if (!ReadDecisionFile(DecisionFilePath(cfg), &f, &err)) {
    *why = "no usable decision file (" + err + ")";
    return false;
  }
  FileRule rule = DecideFromFile(f, *args->pod_namespace, *args->pod_name, args->pod_uid.value_or(""));
  const int64_t age_ms = static_cast<int64_t>(UnixMs()) - f.written_at_ms;
  *why = std::string(FileRuleName(rule)) + " (decision file generation " + std::to_string(f.generation) + ", written " +
         std::to_string(age_ms) + " ms ago)";
  return FileRulePasses(rule);
}

int Run() {
  const int64_t start = MonotonicMs();
  std::vector<EnvVar> env;
  std::string env_err;
  bool env_ok = CollectCniEnv(environ, &env, &env_err);

  std::string stdin_text;
  int read_errno = 0;
  ReadStatus rs = ReadAll(STDIN_FILENO, kMaxStdin, &stdin_text, &read_errno, kStdinTimeoutMs);

  const EnvVar* command_var = FindEnv(env, "CNI_COMMAND");
  Command cmd = command_var ? ParseCommand(command_var->value) : Command::kUnknown;
  if (cmd == Command::kVersion) return Emit(VersionReply(), 0);

  // From here on errors carry the config's cniVersion when it parsed.
  Config cfg;
  ConfigError cfg_err;
  bool cfg_ok = rs == ReadStatus::kOk && ParseConfig(stdin_text, &cfg, &cfg_err);
  const Config* vcfg = cfg_ok ? &cfg : nullptr;

  if (!command_var || command_var->value.empty()) {
    return Fail(vcfg, kErrInvalidEnv, "podwire: CNI_COMMAND is not set",
                "the container runtime sets it to ADD, DEL, CHECK, GC, STATUS or VERSION");
  }
  if (!env_ok) return Fail(vcfg, kErrInvalidEnv, "podwire: invalid CNI environment variable", env_err);
  if (cmd == Command::kUnknown) {
    return Fail(vcfg, kErrInvalidEnv, "podwire: unknown CNI_COMMAND", JsonString(command_var->value));
  }
  if (rs == ReadStatus::kTooBig) {
    return Fail(nullptr, kErrInvalidConfig, "podwire: network configuration on stdin is over 1 MiB",
                "the limit is " + std::to_string(kMaxStdin) + " bytes");
  }
  if (rs == ReadStatus::kTimeout) {
    return Fail(nullptr, kErrDecode, "podwire: stdin was not closed in time",
                "no end of the network configuration within " + std::to_string(kStdinTimeoutMs) +
                    " ms (" + std::to_string(stdin_text.size()) + " bytes read)");
  }
  if (rs == ReadStatus::kError) {
    return Fail(nullptr, kErrDecode, "podwire: reading the network configuration from stdin failed",
                "read: " + std::string(std::strerror(read_errno)));
  }
  if (!cfg_ok) return Fail(nullptr, cfg_err.code, "podwire: invalid network configuration", cfg_err.msg);

  const std::string socket_path = SocketPath(cfg);
  if (socket_path.size() > 107) {
    return Fail(&cfg, kErrInvalidConfig, "podwire: cni_agent_run_dir is too long",
                socket_path + " does not fit a unix socket address (107 bytes)");
  }

  CniArgs args;
  std::string args_err;
  const EnvVar* args_var = FindEnv(env, "CNI_ARGS");
  const bool args_ok = ParseCniArgs(args_var ? args_var->value : "", &args, &args_err);

  // What upstream passes before any lookup needs no agent either.
  if (cmd == Command::kAdd && args_ok) {
    if (const char* why = PassBeforeAgent(cfg, args)) return Pass(cfg, why);
  }

  std::string request = BuildRequestBody(command_var->value, env, stdin_text);
  request.insert(0, BuildRequestHead(request.size()));

  AgentCall call;
  call.socket_path = socket_path;
  call.request = request;
  call.wait_ms = cfg.agent_wait_ms;
  call.timeout_ms = cfg.agent_timeout_ms;
  call.start_ms = start;
  std::string file_note;
  AgentResult res;
  if (cmd == Command::kAdd) {
    // One attempt first: when the agent is down, the decision file may let the pod pass now.
    call.max_attempts = 1;
    res = CallAgent(call);
    if (AgentDown(res)) {
      std::string why;
      if (FilePasses(cfg, args_ok ? &args : nullptr, &why)) {
        return Pass(cfg, "the node agent is not reachable at " + socket_path + " (" + res.detail + "); " + why);
      }
      file_note = "; the pod may need the mesh: " + why;
      call.max_attempts = 0;
      call.attempts_before = res.attempts;
      res = CallAgent(call);  // the rest of agent_wait_ms
    } else if (res.kind == AgentResult::Kind::kUnreachable && res.cause == AgentResult::Cause::kBacklogFull) {
      call.max_attempts = 0;
      call.attempts_before = res.attempts;
      res = CallAgent(call);
    }
  } else {
    res = CallAgent(call);
  }

  switch (res.kind) {
    case AgentResult::Kind::kAnswered:
      return Emit(res.body, res.exit_code);
    case AgentResult::Kind::kProtocolError:
      return Fail(&cfg, kErrTryAgainLater, "podwire: invalid answer from the node agent at " + socket_path,
                  res.detail + "; the agent and podwire-cni may be of different versions");
    case AgentResult::Kind::kUnreachable:
      break;
  }

  FallbackDecision d = DecideUnreachable(cmd, cfg, socket_path, res.detail + file_note);
  Note(d.note + (args_ok ? "" : " (" + args_err + ")"));
  if (d.action == Fallback::kQueueDel) {
    auto val = [&](const char* name) {
      const EnvVar* v = FindEnv(env, name);
      return v ? v->value : std::string();
    };
    DelRecord rec;
    rec.container_id = val("CNI_CONTAINERID");
    rec.netns = val("CNI_NETNS");
    rec.ifname = val("CNI_IFNAME");
    rec.pod_namespace = args.pod_namespace.value_or("");
    rec.pod_name = args.pod_name.value_or("");
    rec.pod_uid = args.pod_uid.value_or("");
    rec.unix_ms = UnixMs();
    // DEL succeeds whatever happens to the record (queue full, bad container ID, I/O error):
    // the runtime must be able to tear the sandbox down. The reason goes to the log.
    QueueResult q = WriteDelRecord(cfg.run_dir, rec);
    Note((q.status == QueueStatus::kWritten ? "DEL record written: " : "DEL record not written: ") + q.detail);
  }
  return Emit(d.stdout_text, d.exit_code);
}

}  // namespace

int main() {
  ::signal(SIGPIPE, SIG_IGN);  // a closed stdout or socket is an error return, not a kill
  return Run();
}
