// Minimal structural shapes of the Kubernetes objects the decisions read. Plain objects
// (informer cache entries, test tables) and @kubernetes/client-node's V1Pod/V1Namespace are
// both assignable, so mesh/ needs no runtime dependency on the client.

export interface MeshObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  labels?: Record<string, string> | null;
  annotations?: Record<string, string> | null;
  /** A Date from the client's deserialiser, an RFC 3339 string from raw JSON. */
  deletionTimestamp?: Date | string | null;
}

export interface MeshPod {
  metadata?: MeshObjectMeta;
  spec?: { hostNetwork?: boolean | null; nodeName?: string };
  status?: { phase?: string };
}

export interface MeshNamespace {
  metadata?: MeshObjectMeta;
}
