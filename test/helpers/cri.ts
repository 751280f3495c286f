// A CRI client for tests that play the kubelet: runtime.v1 RuntimeService and
// ImageService calls over containerd's gRPC socket (test/helpers/grpc.ts), the
// messages encoded by test/helpers/protobuf.ts. Field numbers follow upstream
// k8s.io/cri-api v0.36.3 pkg/apis/runtime/v1/api.proto (only the fields used
// here are declared; the server ignores what it does not know, and so do we).
import { decode, encode, message, type MessageType, type Msg } from './protobuf.js';
import { GrpcUnixClient } from './grpc.js';

// ---- messages ----

const VersionRequest = message('VersionRequest', { version: [1, 'string'] });
const VersionResponse = message('VersionResponse', {
  version: [1, 'string'], runtimeName: [2, 'string'], runtimeVersion: [3, 'string'], runtimeApiVersion: [4, 'string'],
});
const PodSandboxMetadata = message('PodSandboxMetadata', { name: [1, 'string'], uid: [2, 'string'], namespace: [3, 'string'], attempt: [4, 'uint32'] });
const DNSConfig = message('DNSConfig', { servers: [1, 'string', 'repeated'], searches: [2, 'string', 'repeated'], options: [3, 'string', 'repeated'] });
const PortMapping = message('PortMapping', { protocol: [1, 'int32'], containerPort: [2, 'int32'], hostPort: [3, 'int32'], hostIp: [4, 'string'] });
const Int64Value = message('Int64Value', { value: [1, 'int64'] });
const NamespaceOption = message('NamespaceOption', { network: [1, 'int32'], pid: [2, 'int32'], ipc: [3, 'int32'], targetId: [4, 'string'] });
const LinuxSandboxSecurityContext = message('LinuxSandboxSecurityContext', {
  namespaceOptions: [1, NamespaceOption], runAsUser: [3, Int64Value], readonlyRootfs: [4, 'bool'],
  supplementalGroups: [5, 'int64', 'repeated'], privileged: [6, 'bool'], runAsGroup: [8, Int64Value],
});
const LinuxPodSandboxConfig = message('LinuxPodSandboxConfig', {
  cgroupParent: [1, 'string'], securityContext: [2, LinuxSandboxSecurityContext], sysctls: [3, 'map'],
});
const PodSandboxConfig = message('PodSandboxConfig', {
  metadata: [1, PodSandboxMetadata], hostname: [2, 'string'], logDirectory: [3, 'string'], dnsConfig: [4, DNSConfig],
  portMappings: [5, PortMapping, 'repeated'], labels: [6, 'map'], annotations: [7, 'map'], linux: [8, LinuxPodSandboxConfig],
});
const RunPodSandboxRequest = message('RunPodSandboxRequest', { config: [1, PodSandboxConfig], runtimeHandler: [2, 'string'] });
const RunPodSandboxResponse = message('RunPodSandboxResponse', { podSandboxId: [1, 'string'] });
const PodSandboxIdRequest = message('PodSandboxIdRequest', { podSandboxId: [1, 'string'] });
const Empty = message('Empty', {});
const PodSandboxStatusRequest = message('PodSandboxStatusRequest', { podSandboxId: [1, 'string'], verbose: [2, 'bool'] });
const PodIP = message('PodIP', { ip: [1, 'string'] });
const PodSandboxNetworkStatus = message('PodSandboxNetworkStatus', { ip: [1, 'string'], additionalIps: [2, PodIP, 'repeated'] });
const Namespace = message('Namespace', { options: [2, NamespaceOption] });
const LinuxPodSandboxStatus = message('LinuxPodSandboxStatus', { namespaces: [1, Namespace] });
const PodSandboxStatus = message('PodSandboxStatus', {
  id: [1, 'string'], metadata: [2, PodSandboxMetadata], state: [3, 'int32'], createdAt: [4, 'int64'],
  network: [5, PodSandboxNetworkStatus], linux: [6, LinuxPodSandboxStatus], labels: [7, 'map'], annotations: [8, 'map'],
  runtimeHandler: [9, 'string'],
});
const PodSandboxStatusResponse = message('PodSandboxStatusResponse', { status: [1, PodSandboxStatus], info: [2, 'map'] });
const PodSandboxStateValue = message('PodSandboxStateValue', { state: [1, 'int32'] });
const PodSandboxFilter = message('PodSandboxFilter', { id: [1, 'string'], state: [2, PodSandboxStateValue], labelSelector: [3, 'map'] });
const ListPodSandboxRequest = message('ListPodSandboxRequest', { filter: [1, PodSandboxFilter] });
const PodSandbox = message('PodSandbox', {
  id: [1, 'string'], metadata: [2, PodSandboxMetadata], state: [3, 'int32'], createdAt: [4, 'int64'],
  labels: [5, 'map'], annotations: [6, 'map'], runtimeHandler: [7, 'string'],
});
const ListPodSandboxResponse = message('ListPodSandboxResponse', { items: [1, PodSandbox, 'repeated'] });

const ContainerMetadata = message('ContainerMetadata', { name: [1, 'string'], attempt: [2, 'uint32'] });
const ImageSpec = message('ImageSpec', { image: [1, 'string'], annotations: [2, 'map'] });
const KeyValue = message('KeyValue', { key: [1, 'string'], value: [2, 'string'] });
const Capability = message('Capability', { addCapabilities: [1, 'string', 'repeated'], dropCapabilities: [2, 'string', 'repeated'] });
const LinuxContainerSecurityContext = message('LinuxContainerSecurityContext', {
  capabilities: [1, Capability], privileged: [2, 'bool'], namespaceOptions: [3, NamespaceOption], runAsUser: [5, Int64Value],
  readonlyRootfs: [7, 'bool'], noNewPrivs: [11, 'bool'],
});
const LinuxContainerConfig = message('LinuxContainerConfig', { securityContext: [2, LinuxContainerSecurityContext] });
const ContainerConfig = message('ContainerConfig', {
  metadata: [1, ContainerMetadata], image: [2, ImageSpec], command: [3, 'string', 'repeated'], args: [4, 'string', 'repeated'],
  workingDir: [5, 'string'], envs: [6, KeyValue, 'repeated'], labels: [9, 'map'], annotations: [10, 'map'],
  logPath: [11, 'string'], linux: [15, LinuxContainerConfig],
});
const CreateContainerRequest = message('CreateContainerRequest', {
  podSandboxId: [1, 'string'], config: [2, ContainerConfig], sandboxConfig: [3, PodSandboxConfig],
});
const CreateContainerResponse = message('CreateContainerResponse', { containerId: [1, 'string'] });
const ContainerIdRequest = message('ContainerIdRequest', { containerId: [1, 'string'] });
const StopContainerRequest = message('StopContainerRequest', { containerId: [1, 'string'], timeout: [2, 'int64'] });
const ExecSyncRequest = message('ExecSyncRequest', { containerId: [1, 'string'], cmd: [2, 'string', 'repeated'], timeout: [3, 'int64'] });
const ExecSyncResponse = message('ExecSyncResponse', { stdout: [1, 'bytes'], stderr: [2, 'bytes'], exitCode: [3, 'int32'] });
const ContainerStatusRequest = message('ContainerStatusRequest', { containerId: [1, 'string'], verbose: [2, 'bool'] });
const ContainerStatus = message('ContainerStatus', {
  id: [1, 'string'], metadata: [2, ContainerMetadata], state: [3, 'int32'], createdAt: [4, 'int64'], startedAt: [5, 'int64'],
  finishedAt: [6, 'int64'], exitCode: [7, 'int32'], image: [8, ImageSpec], imageRef: [9, 'string'], reason: [10, 'string'],
  message: [11, 'string'], logPath: [15, 'string'],
});
const ContainerStatusResponse = message('ContainerStatusResponse', { status: [1, ContainerStatus], info: [2, 'map'] });

const StatusRequest = message('StatusRequest', { verbose: [1, 'bool'] });
const RuntimeCondition = message('RuntimeCondition', { type: [1, 'string'], status: [2, 'bool'], reason: [3, 'string'], message: [4, 'string'] });
const RuntimeStatus = message('RuntimeStatus', { conditions: [1, RuntimeCondition, 'repeated'] });
const StatusResponse = message('StatusResponse', { status: [1, RuntimeStatus], info: [2, 'map'] });

const ImageStatusRequest = message('ImageStatusRequest', { image: [1, ImageSpec], verbose: [2, 'bool'] });
const Image = message('Image', { id: [1, 'string'], repoTags: [2, 'string', 'repeated'], repoDigests: [3, 'string', 'repeated'] });
const ImageStatusResponse = message('ImageStatusResponse', { image: [1, Image], info: [2, 'map'] });

// ---- types (what the tests read and write) ----

/** NamespaceMode: POD=0, CONTAINER=1, NODE=2, TARGET=3. */
export const NamespaceMode = { POD: 0, CONTAINER: 1, NODE: 2, TARGET: 3 } as const;
/** PodSandboxState. */
export const SANDBOX_READY = 0;
export const SANDBOX_NOTREADY = 1;
/** ContainerState. */
export const ContainerState = { CREATED: 0, RUNNING: 1, EXITED: 2, UNKNOWN: 3 } as const;

export interface PodSandboxMetadataT { name: string; uid: string; namespace: string; attempt?: number }
export interface PodSandboxConfigT {
  metadata: PodSandboxMetadataT;
  hostname?: string;
  logDirectory?: string;
  dnsConfig?: { servers?: string[]; searches?: string[]; options?: string[] };
  portMappings?: Array<{ protocol?: number; containerPort: number; hostPort?: number; hostIp?: string }>;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  linux?: {
    cgroupParent?: string;
    securityContext?: {
      namespaceOptions?: { network?: number; pid?: number; ipc?: number; targetId?: string };
      privileged?: boolean;
      readonlyRootfs?: boolean;
      runAsUser?: { value: number | bigint };
      runAsGroup?: { value: number | bigint };
      supplementalGroups?: Array<number | bigint>;
    };
    sysctls?: Record<string, string>;
  };
}

export interface RuntimeConditionT { type: string; status: boolean; reason: string; message: string }

export interface VersionT { version: string; runtimeName: string; runtimeVersion: string; runtimeApiVersion: string }

export interface PodSandboxStatusT {
  id: string;
  metadata: PodSandboxMetadataT | undefined;
  /** SANDBOX_READY (0) or SANDBOX_NOTREADY (1). */
  state: number;
  createdAt: bigint;
  network: { ip: string; additionalIps: Array<{ ip: string }> } | undefined;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  runtimeHandler: string;
}

export interface PodSandboxStatusResponseT {
  status: PodSandboxStatusT | undefined;
  /** With `verbose`: containerd puts one JSON document under `info` (pid, runtimeSpec, cniResult, ...). */
  info: Record<string, string>;
}

export interface PodSandboxT {
  id: string;
  metadata: PodSandboxMetadataT | undefined;
  state: number;
  createdAt: bigint;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  runtimeHandler: string;
}

export interface ContainerConfigT {
  metadata: { name: string; attempt?: number };
  image: { image: string };
  command?: string[];
  args?: string[];
  workingDir?: string;
  envs?: Array<{ key: string; value: string }>;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Relative to the sandbox's logDirectory. */
  logPath?: string;
  linux?: {
    securityContext?: {
      capabilities?: { addCapabilities?: string[]; dropCapabilities?: string[] };
      privileged?: boolean;
      namespaceOptions?: { network?: number; pid?: number; ipc?: number; targetId?: string };
      runAsUser?: { value: number | bigint };
      readonlyRootfs?: boolean;
      noNewPrivs?: boolean;
    };
  };
}

export interface ContainerStatusT {
  id: string;
  state: number;
  exitCode: number;
  reason: string;
  message: string;
  logPath: string;
  startedAt: bigint;
  finishedAt: bigint;
}

export interface ExecSyncResultT { stdout: Buffer; stderr: Buffer; exitCode: number }

export interface CallOptions { timeoutMs?: number }

const RUNTIME = '/runtime.v1.RuntimeService/';
const IMAGE = '/runtime.v1.ImageService/';

export class CriClient {
  private readonly grpc: GrpcUnixClient;

  /** `socket`: containerd's gRPC socket path. */
  constructor(readonly socket: string, opts: { timeoutMs?: number } = {}) {
    this.grpc = new GrpcUnixClient(socket, opts.timeoutMs ?? 60_000);
  }

  private async call(path: string, req: MessageType, res: MessageType, body: Msg, opts: CallOptions = {}): Promise<Msg> {
    const out = await this.grpc.unary(path, encode(req, body), opts);
    return decode(res, out);
  }

  async version(opts?: CallOptions): Promise<VersionT> {
    return await this.call(`${RUNTIME}Version`, VersionRequest, VersionResponse, { version: 'v1' }, opts) as unknown as VersionT;
  }

  /**
   * Status: the runtime's conditions (`RuntimeReady`, `NetworkReady`: false with reason
   * `NetworkPluginNotReady` until a valid CNI config is in the conf dir), as the kubelet polls it.
   */
  async status(opts: CallOptions & { verbose?: boolean } = {}): Promise<{ conditions: RuntimeConditionT[]; info: Record<string, string> }> {
    const r = await this.call(`${RUNTIME}Status`, StatusRequest, StatusResponse, { verbose: opts.verbose ?? false }, opts);
    const st = r.status as { conditions: RuntimeConditionT[] } | undefined;
    return { conditions: st?.conditions ?? [], info: r.info as Record<string, string> };
  }

  /** RunPodSandbox: resolves the sandbox id once the sandbox runs and its CNI ADD succeeded. */
  async runPodSandbox(config: PodSandboxConfigT, opts: CallOptions & { runtimeHandler?: string } = {}): Promise<string> {
    const body: Msg = { config: config as unknown as Msg, ...(opts.runtimeHandler ? { runtimeHandler: opts.runtimeHandler } : {}) };
    const r = await this.call(`${RUNTIME}RunPodSandbox`, RunPodSandboxRequest, RunPodSandboxResponse, body, opts);
    return r.podSandboxId as string;
  }

  async stopPodSandbox(podSandboxId: string, opts?: CallOptions): Promise<void> {
    await this.call(`${RUNTIME}StopPodSandbox`, PodSandboxIdRequest, Empty, { podSandboxId }, opts);
  }

  async removePodSandbox(podSandboxId: string, opts?: CallOptions): Promise<void> {
    await this.call(`${RUNTIME}RemovePodSandbox`, PodSandboxIdRequest, Empty, { podSandboxId }, opts);
  }

  async podSandboxStatus(podSandboxId: string, opts: CallOptions & { verbose?: boolean } = {}): Promise<PodSandboxStatusResponseT> {
    return await this.call(`${RUNTIME}PodSandboxStatus`, PodSandboxStatusRequest, PodSandboxStatusResponse,
      { podSandboxId, verbose: opts.verbose ?? false }, opts) as unknown as PodSandboxStatusResponseT;
  }

  async listPodSandbox(filter: { id?: string; state?: number; labelSelector?: Record<string, string> } = {}, opts?: CallOptions): Promise<PodSandboxT[]> {
    const f: Msg = {};
    if (filter.id !== undefined) f.id = filter.id;
    if (filter.state !== undefined) f.state = { state: filter.state };
    if (filter.labelSelector !== undefined) f.labelSelector = filter.labelSelector;
    const r = await this.call(`${RUNTIME}ListPodSandbox`, ListPodSandboxRequest, ListPodSandboxResponse,
      Object.keys(f).length ? { filter: f } : {}, opts);
    return r.items as PodSandboxT[];
  }

  async createContainer(podSandboxId: string, config: ContainerConfigT, sandboxConfig: PodSandboxConfigT, opts?: CallOptions): Promise<string> {
    const r = await this.call(`${RUNTIME}CreateContainer`, CreateContainerRequest, CreateContainerResponse,
      { podSandboxId, config: config as unknown as Msg, sandboxConfig: sandboxConfig as unknown as Msg }, opts);
    return r.containerId as string;
  }

  async startContainer(containerId: string, opts?: CallOptions): Promise<void> {
    await this.call(`${RUNTIME}StartContainer`, ContainerIdRequest, Empty, { containerId }, opts);
  }

  /** `timeoutSeconds`: grace period before SIGKILL (0: kill at once). */
  async stopContainer(containerId: string, timeoutSeconds = 0, opts?: CallOptions): Promise<void> {
    await this.call(`${RUNTIME}StopContainer`, StopContainerRequest, Empty, { containerId, timeout: timeoutSeconds }, opts);
  }

  async removeContainer(containerId: string, opts?: CallOptions): Promise<void> {
    await this.call(`${RUNTIME}RemoveContainer`, ContainerIdRequest, Empty, { containerId }, opts);
  }

  async containerStatus(containerId: string, opts?: CallOptions): Promise<ContainerStatusT | undefined> {
    const r = await this.call(`${RUNTIME}ContainerStatus`, ContainerStatusRequest, ContainerStatusResponse, { containerId }, opts);
    return r.status as ContainerStatusT | undefined;
  }

  /** ExecSync: runs `cmd` in the container; `timeoutSeconds` 0 = no limit on the runtime side. */
  async execSync(containerId: string, cmd: string[], timeoutSeconds = 10, opts?: CallOptions): Promise<ExecSyncResultT> {
    const r = await this.call(`${RUNTIME}ExecSync`, ExecSyncRequest, ExecSyncResponse, { containerId, cmd, timeout: timeoutSeconds },
      { timeoutMs: (timeoutSeconds + 10) * 1000, ...opts });
    return r as unknown as ExecSyncResultT;
  }

  /** ImageService.ImageStatus: the image as CRI sees it, or undefined when CRI does not know it. */
  async imageStatus(image: string, opts?: CallOptions): Promise<{ id: string; repoTags: string[] } | undefined> {
    const r = await this.call(`${IMAGE}ImageStatus`, ImageStatusRequest, ImageStatusResponse, { image: { image } }, opts);
    return r.image as { id: string; repoTags: string[] } | undefined;
  }

  close(): void {
    this.grpc.close();
  }
}
