// The shapes the enrollment pipeline works with, and the interfaces of the
// subsystems it drives. Real implementations live beside (rules: redirect/,
// ztunnel: zds/, probe set: probe-set.ts); tests may inject fakes.
import type { Netns } from '../net/netns/netns.js';

export interface PodInfo {
  uid: string;
  name: string;
  namespace: string;
  serviceAccount?: string;
  /** Pod IPs (v4 and/or v6), as in pod status or the CNI prevResult. */
  ips: string[];
  annotations?: Record<string, string>;
}

export interface DriftReport {
  ok: boolean;
  /** One line per difference: what is missing, foreign or different. */
  drift: string[];
}

/** Programs, checks and removes the in-pod redirection of one pod. */
export interface RuleBackend {
  apply(ns: Netns, pod: PodInfo): Promise<void>;
  verify(ns: Netns, pod: PodInfo): Promise<DriftReport>;
  remove(ns: Netns, pod: PodInfo): Promise<void>;
}

/** Hands pods to ztunnel (the ZDS server). */
export interface ZtunnelSink {
  podAdded(pod: PodInfo, ns: Netns): Promise<void>;
  podDeleted(uid: string): Promise<void>;
  /** Is ztunnel currently holding this pod (as far as we know)? */
  knows?(uid: string): boolean;
}

export interface ProbeEntry {
  ip: string;
  /** The pod UID stored as the entry's comment. */
  uid: string;
}

/** The host-side set of enrolled pod IPs that kubelet probes are SNATed for. */
export interface ProbeSet {
  /** Creates the set(s) (and host rule) if missing. */
  ensure(): Promise<void>;
  /** Adds or overwrites (upsert) each IP with the pod UID as comment. */
  upsert(ips: string[], uid: string): Promise<void>;
  /** Removes each IP only when its comment is `uid`; reports foreign owners. */
  removeOwned(ips: string[], uid: string): Promise<{ removed: string[]; foreign: ProbeEntry[] }>;
  list(): Promise<ProbeEntry[]>;
  /** Removes every entry whose IP is not in `keep`. */
  prune(keep: ReadonlySet<string>): Promise<string[]>;
  flush(): Promise<void>;
}
