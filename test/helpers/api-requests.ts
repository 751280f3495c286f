// What one identity asked of the API server, read off the wire: every HTTP request this process
// sends with that identity's Authorization header (Node's `http.client.request.start` channel,
// which typed calls and client-node's Watch both pass through, whatever code path made them),
// turned into RBAC request attributes the way the apiserver's request-info resolver does, with
// the response status. Nothing in lib/ is involved, so no call can slip past the recording.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientRequest, IncomingMessage } from 'node:http';
import type { V1PolicyRule } from '@kubernetes/client-node';
import type { KubeClient } from '../../lib/kube/client.js';

export interface ApiRequest {
  method: string;
  path: string;
  /** RBAC attributes; undefined for a non-resource URL (e.g. /version). */
  group?: string;
  /** `resource` or `resource/subresource`. */
  resource?: string;
  verb?: string;
  namespace?: string;
  name?: string;
  /** The response's HTTP status (undefined: no response seen). */
  status?: number;
}

// The apiserver's namespace subresources: /api/v1/namespaces/<n>/status is a namespace's, not a resource "status".
const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

/** RBAC attributes of one request, as k8s.io/apiserver's RequestInfoFactory derives them. */
export function requestInfo(method: string, path: string): ApiRequest {
  const url = new URL(path, 'http://x');
  const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  const out: ApiRequest = { method, path };
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) {
    out.group = '';
    rest = parts.slice(2);
  } else if (parts[0] === 'apis' && parts.length >= 3) {
    out.group = parts[1]!;
    rest = parts.slice(3);
  } else {
    return out;
  }
  // The deprecated /api/v1/watch/... form.
  const watchPath = rest[0] === 'watch';
  if (watchPath) rest = rest.slice(1);
  if (rest[0] === 'namespaces' && rest.length > 1) {
    out.namespace = rest[1]!;
    if (rest.length > 2 && !NAMESPACE_SUBRESOURCES.has(rest[2]!)) rest = rest.slice(2);
  }
  const [resource, name, sub] = rest;
  if (!resource) return { method, path };
  out.resource = sub ? `${resource}/${sub}` : resource;
  if (name) out.name = name;
  const watch = watchPath || ['true', '1'].includes(url.searchParams.get('watch') ?? '');
  out.verb = ({
    GET: name ? (watch ? 'watch' : 'get') : (watch ? 'watch' : 'list'),
    POST: 'create', PUT: 'update', PATCH: 'patch',
    DELETE: name ? 'delete' : 'deletecollection',
  } as Record<string, string>)[method] ?? method.toLowerCase();
  return out;
}

export interface Recorder {
  readonly requests: ApiRequest[];
  stop(): void;
}

/** Starts recording the requests `client`'s identity sends (its current Authorization header). */
export async function recordRequests(client: KubeClient): Promise<Recorder> {
  const auth = await client.credentials.authorization();
  if (!auth) throw new Error('recordRequests: the client has no Authorization header to tell its requests by');
  const requests: ApiRequest[] = [];
  const mine = new WeakMap<ClientRequest, ApiRequest>();
  const onStart = (m: unknown) => {
    const { request } = m as { request: ClientRequest };
    // node-fetch sets every header as a one-element array.
    const h = request.getHeader('authorization');
    if ((Array.isArray(h) ? h[0] : h) !== auth) return;
    const r = requestInfo(request.method, request.path);
    mine.set(request, r);
    requests.push(r);
  };
  // Published when the response's head arrives (a watch's too).
  const onResponse = (m: unknown) => {
    const { request, response } = m as { request: ClientRequest; response: IncomingMessage };
    const r = mine.get(request);
    if (r) r.status = response.statusCode;
  };
  subscribe('http.client.request.start', onStart);
  subscribe('http.client.response.finish', onResponse);
  return {
    requests,
    stop: () => {
      unsubscribe('http.client.request.start', onStart);
      unsubscribe('http.client.response.finish', onResponse);
    },
  };
}

/** One RBAC grant: group, resource[/sub], verb and its resourceNames (empty: any name). */
export interface Grant {
  group: string;
  resource: string;
  verb: string;
  resourceNames: readonly string[];
}

export const grantKey = (g: Grant): string => `${g.group || 'core'} ${g.resource} ${g.verb}${g.resourceNames.length ? ` [${[...g.resourceNames].sort().join(',')}]` : ''}`;

/** A role's rules as single grants (the product of apiGroups × resources × verbs). */
export function grantsOf(rules: readonly V1PolicyRule[]): Grant[] {
  const out: Grant[] = [];
  for (const r of rules) {
    if (r.nonResourceURLs?.length) throw new Error('grantsOf: non-resource rules are not expected in the agent\'s roles');
    for (const group of r.apiGroups ?? []) {
      for (const resource of r.resources ?? []) {
        for (const verb of r.verbs) out.push({ group, resource, verb, resourceNames: r.resourceNames ?? [] });
      }
    }
  }
  return out;
}

/** Whether `g` authorizes request `r` (no wildcards: the agent's roles have none). */
export function authorizes(g: Grant, r: ApiRequest): boolean {
  return g.group === r.group && g.resource === r.resource && g.verb === r.verb
    && (g.resourceNames.length === 0 || (r.name !== undefined && g.resourceNames.includes(r.name)));
}

/** `verb group resource[/sub] [name]`, for messages. */
export const requestLabel = (r: ApiRequest): string =>
  r.resource === undefined ? `${r.method} ${r.path} (non-resource)` : `${r.verb} ${r.group || 'core'} ${r.resource}${r.name ? ` ${r.name}` : ''}`;
