// containerd 1.6's config.toml for a runtime that owns nothing of the host's: every dir and
// socket under paths given here, CRI with runc (cgroupfs), the pause image as the sandbox, the
// CNI dirs given. Used by the CRI tests (test/helpers/containerd.ts) and the real node
// (scripts/kube/node.mjs).
const toml = (s) => JSON.stringify(s); // TOML basic strings take JSON's escapes for what we put there

/** o: { root, state, temp, opt, socket, sandboxImage, cniBinDir, cniConfDir, logLevel? } */
export function containerdConfigToml(o) {
  return `version = 2
root = ${toml(o.root)}
state = ${toml(o.state)}
temp = ${toml(o.temp)}
plugin_dir = ""
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
oom_score = 0

[grpc]
  address = ${toml(o.socket)}
[ttrpc]
  address = ${toml(`${o.socket}.ttrpc`)}
[debug]
  address = ""
  level = ${toml(o.logLevel ?? 'info')}
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = ${toml(o.opt)}
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ${toml(o.sandboxImage)}
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ${toml(o.cniBinDir)}
    conf_dir = ${toml(o.cniConfDir)}
    max_conf_num = 1
`;
}
