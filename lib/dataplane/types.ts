// The shapes the enrollment pipeline works with, and the interfaces of the
// subsystems it drives. Real implementations live beside (rules: redirect/,
// ztunnel: ztunnel-zds.ts over zds/, probe set: probe-set-ipset.ts / probe-set-nft.ts);
// tests may inject fakes.
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
  /** `connectWaitMs`: with no ztunnel connected, wait this long for one before failing. */
  podAdded(pod: PodInfo, ns: Netns, opts?: { connectWaitMs?: number }): Promise<void>;
  podDeleted(uid: string): Promise<void>;
  /** Is ztunnel currently holding this pod (as far as we know)? */
  knows?(uid: string): boolean;
  /** Is any ztunnel connected? (Without one, a pod ztunnel does not know is not drift to repair.) */
  connected?(): boolean;
}

export interface ProbeEntry {
  ip: string;
  /** The pod UID stored as the entry's comment. */
  uid: string;
}

/**
 * The kernel side of the host probe set (the IPs kubelet probes are SNATed
 * for), one implementation per backend. Ownership (which pod an IP belongs
 * to) is decided above it, in ProbeIndex, which serialises writes per IP.
 */
export interface ProbeSet {
  /** Creates the set(s) (and host rule) if missing. */
  ensure(): Promise<void>;
  /** Whether an IP goes into the set at all (IPv6 ones are ignored without IPv6, as upstream). */
  handles(ip: string): boolean;
  /**
   * Adds or overwrites (upsert) each entry's IP with its pod UID as comment,
   * in as few kernel requests as the backend allows (a restart's refill
   * writes every pod's IPs at once). `fresh`: the caller believes none of
   * these IPs is in the set (a cheaper write is tried first; an entry that
   * is there after all is still overwritten).
   */
  upsert(entries: ProbeEntry[], opts?: { fresh?: boolean }): Promise<void>;
  /** Removes each IP, whoever owns it; a missing one is no error. */
  remove(ips: string[]): Promise<void>;
  /** Every entry, read from the kernel (IPs in canonical form). */
  list(): Promise<ProbeEntry[]>;
  flush(): Promise<void>;
  /** Removes the set(s) from the kernel (agent uninstall); missing ones are no error. */
  destroy(): Promise<void>;
}
