// "May I?" before acting: SelfSubjectAccessReviews (every authenticated identity may create
// them) for a list of resource attributes, so a component whose RBAC lacks a permission fails at
// start with the permission named instead of failing on its first real call. Rejects with the
// KubeError of the review call (Forbidden or NotFound when reviews are unavailable: the caller
// decides whether to probe another way or go on).
import type { V1SelfSubjectAccessReview } from '@kubernetes/client-node';
import type { KubeClient } from './client.js';
import { withRetry } from './retry.js';

export interface AccessAttributes {
  /** API group; '' (core) by default. */
  group?: string;
  resource: string;
  subresource?: string;
  verb: string;
  /** Omitted: every namespace (a cluster-wide grant is needed). */
  namespace?: string;
  name?: string;
}

/** `resource[/subresource]/verb`, e.g. `pods/delete`, `pods/status/patch`. */
export function accessLabel(a: AccessAttributes): string {
  return `${a.resource}${a.subresource ? `/${a.subresource}` : ''}/${a.verb}`;
}

/** The attributes the client's identity is not allowed, as accessLabel()s (empty: all allowed). */
export async function missingAccess(client: KubeClient, wanted: readonly AccessAttributes[]): Promise<string[]> {
  const denied = await Promise.all(wanted.map(async (a) => {
    const r = await withRetry(() => client.call({ verb: 'create', resource: 'selfsubjectaccessreviews' },
      (o) => client.send<V1SelfSubjectAccessReview>({
        method: 'POST', path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', kind: 'Object',
        body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: {
          group: a.group ?? '', resource: a.resource, verb: a.verb,
          ...(a.subresource ? { subresource: a.subresource } : {}),
          ...(a.namespace ? { namespace: a.namespace } : {}),
          ...(a.name ? { name: a.name } : {}),
        } } },
      }, o)));
    return r.status?.allowed ? undefined : accessLabel(a);
  }));
  return denied.filter((m): m is string => m !== undefined);
}
