// The package entry loads without touching the kernel and exposes the library.
import { describe, expect, it } from 'vitest';
import * as podwire from '../lib/index.js';

describe('package exports', () => {
  it('exposes the library surface', () => {
    for (const name of ['Netns', 'NetError', 'isExist', 'isNotFound', 'connectTcp', 'listenTcp', 'listenUnix', 'connectUnix',
      'iptables', 'nft', 'Transaction', 'nftNative', 'captureNft', 'replayNft', 'ZdsServer', 'Dataplane',
      'NodeDataplane', 'EnrollError']) {
      expect(podwire, name).toHaveProperty(name);
    }
    expect(typeof podwire.redirect.inpodRules).toBe('function');
    expect(typeof podwire.redirect.apply).toBe('function');
    expect(podwire.ZTUNNEL_SOCKET_PATH).toBe('/var/run/ztunnel/ztunnel.sock');
  });
});

describe('package exports: podwire/testing', () => {
  it('holds the peer stand-ins, which the root entry does not', async () => {
    const testing = await import('../lib/testing/index.js');
    for (const name of ['ZtunnelPeer', 'buildNode']) expect(testing, name).toHaveProperty(name);
    expect(podwire).not.toHaveProperty('ZtunnelPeer');
  });
});

describe('package exports: podwire/kube', () => {
  it('is its own entry, and the root entry does not load client-node', async () => {
    const kube = await import('../lib/kube/index.js');
    for (const name of ['KubeClient', 'KubeError', 'loadCredentials', 'Informer', 'podInformer', 'getPod', 'createPodEvent']) {
      expect(kube, name).toHaveProperty(name);
    }
    expect(podwire).not.toHaveProperty('kube');
  });
});

describe('package exports: podwire/agent', () => {
  it('is its own entry with the agent, its configuration, logging and metrics', async () => {
    const agent = await import('../lib/agent/index.js');
    for (const name of ['Agent', 'parseAgentConfig', 'describeSettings', 'ConfigError', 'createLogging', 'createAgentMetrics', 'DriftCheck', 'decideCleanup', 'selectBackend']) {
      expect(agent, name).toHaveProperty(name);
    }
    expect(podwire).not.toHaveProperty('Agent');
  });
});
