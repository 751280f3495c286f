// Pod identity from the runtime (CNI_ARGS) and from Istio's plugin (/cmdadd) is validated before
// anything looks it up: `..` as a pod name used to reach the API path and fetch the Namespace.
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseCniArgs } from '../../lib/cni/cni-args.js';
import { CmdAddBodyError, parseCmdAddBody, type CmdAddRequest } from '../../lib/cni/cmdadd-body.js';
import { startCniEndpoint, type CniEndpoint } from '../../lib/cni/endpoint.js';
import { CNI_CODES, CniError } from '../../lib/cni/errors.js';
import { CniPlugin, type CniPluginDeps } from '../../lib/cni/plugin.js';
import { InvalidNameError } from '../../lib/kube/names.js';

const BAD_POD_NAMES = ['..', '.', 'a/b', '%2e%2e', 'Web-0', 'a'.repeat(254), 'a..b', '-a', 'a b'];
const BAD_NAMESPACES = ['..', '.', 'a/b', '%2e%2e', 'Default', 'a.b', 'a'.repeat(64)];

function cniError(fn: () => unknown): CniError {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(CniError);
  return err as CniError;
}

const args = (name: string, ns = 'default', uid = '6b2f1a7e-0c3d-4e8a-9f21-5d7c8b9a0e11') =>
  `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=${uid}`;

describe('CNI_ARGS', () => {
  it('exposes K8S_POD_UID as podUid', () => {
    expect(parseCniArgs(args('web-0'))).toEqual({ podName: 'web-0', podNamespace: 'default', podUid: '6b2f1a7e-0c3d-4e8a-9f21-5d7c8b9a0e11', infraContainerId: 'abc' });
    expect(parseCniArgs('K8S_POD_NAME=web-0;K8S_POD_NAMESPACE=default').podUid).toBe('');  // not sent
  });

  it.each(BAD_POD_NAMES)('K8S_POD_NAME %j is code 4 (invalid environment), naming the key', (name) => {
    const e = cniError(() => parseCniArgs(args(name)));
    expect(e.cniCode).toBe(CNI_CODES.INVALID_ENV);
    expect(e.cause).toBeInstanceOf(InvalidNameError);
    expect(e.cause).toMatchObject({ field: 'K8S_POD_NAME', rule: 'dns-subdomain' });
  });

  it.each(BAD_NAMESPACES)('K8S_POD_NAMESPACE %j is code 4, naming the key', (ns) => {
    const e = cniError(() => parseCniArgs(args('web-0', ns)));
    expect(e.cniCode).toBe(CNI_CODES.INVALID_ENV);
    expect(e.cause).toMatchObject({ field: 'K8S_POD_NAMESPACE', rule: 'dns-label' });
  });

  it.each([['x'.repeat(129)], ['../etc'], ['a\tb'], ['a\u007fb']])('K8S_POD_UID %j is code 4', (uid) => {
    const e = cniError(() => parseCniArgs(args('web-0', 'default', uid)));
    expect(e.cniCode).toBe(CNI_CODES.INVALID_ENV);
    expect(e.cause).toMatchObject({ field: 'K8S_POD_UID', rule: 'uid' });
  });

  it('accepts any UID a runtime may send (not only RFC 4122)', () => {
    expect(parseCniArgs(args('web-0', 'default', 'u1')).podUid).toBe('u1');
    expect(parseCniArgs(args('web-0', 'default', 'x'.repeat(128))).podUid).toBe('x'.repeat(128));
  });

  it('onInvalid "drop" (for DEL) blanks what is invalid and keeps the rest', () => {
    expect(parseCniArgs(args('..', 'default', '../x'), { onInvalid: 'drop' })).toEqual({ podName: '', podNamespace: 'default', podUid: '', infraContainerId: 'abc' });
  });
});

describe('/cmdadd body', () => {
  const body = (podName: string, podNamespace = 'default') => JSON.stringify({ Netns: '/var/run/netns/cni-1', PodName: podName, PodNamespace: podNamespace, IPs: null });

  function bodyError(text: string): CmdAddBodyError {
    let err: unknown;
    try {
      parseCmdAddBody(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CmdAddBodyError);
    return err as CmdAddBodyError;
  }

  it.each(BAD_POD_NAMES)('PodName %j is ERR_CNI_EVENT_NAME for field PodName', (name) => {
    expect(bodyError(body(name))).toMatchObject({ code: 'ERR_CNI_EVENT_NAME', field: 'PodName' });
  });

  it.each(BAD_NAMESPACES)('PodNamespace %j is ERR_CNI_EVENT_NAME for field PodNamespace', (ns) => {
    expect(bodyError(body('web-0', ns))).toMatchObject({ code: 'ERR_CNI_EVENT_NAME', field: 'PodNamespace' });
  });

  it('says how the name is invalid', () => {
    expect(bodyError(body('a'.repeat(254))).nameReason).toBe('too-long');
    expect(bodyError(body('..')).nameReason).toBe('bad-format');
    expect(parseCmdAddBody(body('web-0.a-b', 'kube-system'))).toMatchObject({ podName: 'web-0.a-b', podNamespace: 'kube-system' });
  });

  describe('through the endpoint', () => {
    const eps: CniEndpoint[] = [];
    const dirs: string[] = [];
    afterEach(async () => {
      await Promise.all(eps.splice(0).map((e) => e.close()));
      for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
    });

    function post(socketPath: string, text: string): Promise<{ status: number; body: string }> {
      return new Promise((resolve, reject) => {
        const req = request({ socketPath, method: 'POST', path: '/cmdadd', headers: { Host: 'unix', 'Content-Type': 'application/json' } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        });
        req.on('error', reject);
        req.end(text);
      });
    }

    it('answers 400 and never calls the handler for PodName ".." or "."', async () => {
      const root = mkdtempSync(join(tmpdir(), 'pwt-cni-inputs-'));
      dirs.push(root);
      const got: CmdAddRequest[] = [];
      const ep = await startCniEndpoint({ runDir: join(root, 'run'), onCmdAdd: async (r) => { got.push(r); } });
      eps.push(ep);
      for (const name of ['..', '.']) expect((await post(ep.socketPath, body(name))).status).toBe(400);
      expect((await post(ep.socketPath, body('web-0', '..'))).status).toBe(400);
      expect(got).toEqual([]);
      expect((await post(ep.socketPath, body('web-0'))).status).toBe(200);
      expect(got.map((r) => r.podName)).toEqual(['web-0']);
    });
  });
});

describe('the plugin refuses a bad name before any lookup', () => {
  it('ADD with K8S_POD_NAME ".." is code 4 and touches neither the informer cache nor the API client', async () => {
    const touched: string[] = [];
    // Every dependency but the logger records its use and fails.
    const deps = new Proxy({}, {
      get: (_t, key) => {
        if (key === 'log') return undefined;
        touched.push(String(key));
        return () => { throw new Error(`${String(key)} used`); };
      },
    }) as CniPluginDeps;
    const plugin = new CniPlugin(deps);
    const config = JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'podwire-cni', ambient_enabled: true });
    for (const a of [args('..'), args('.'), args('web-0', '..'), args('%2e%2e')]) {
      const reply = await plugin.handle({ command: 'ADD', containerId: 'c1', netns: '/var/run/netns/cni-1', ifname: 'eth0', args: a, path: '/opt/cni/bin', config });
      expect(reply.exitCode).toBe(1);
      expect(JSON.parse(reply.stdout)).toMatchObject({ cniVersion: '1.0.0', code: CNI_CODES.INVALID_ENV });
    }
    expect(touched.filter((k) => k === 'controller' || k === 'client')).toEqual([]);
  });
});
