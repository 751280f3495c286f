// Which file the installer picks (§3.3): the candidate list with kubelet/libcni semantics,
// the Go JSON encoder the merge writes with, and the primary-path resolution with its waits.
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { libcniProblem, listCandidates } from '../../lib/install/candidates.js';
import { resolvePrimary } from '../../lib/install/config-path.js';
import { compareUtf8, marshalIndent, Ordered } from '../../lib/install/go-json.js';
import { fixture, recorder, tempDir } from './helpers.js';

function dirWith(files: Record<string, string>): string {
  const d = tempDir();
  for (const [name, text] of Object.entries(files)) writeFileSync(join(d, name), text);
  return d;
}

describe('libcni validity of one file', () => {
  it.each([
    ['pre/calico.conflist', 'x.conflist', undefined],
    ['pre/nover_calico.conflist', 'x.conflist', undefined],
    ['pre/minikube_cni.conf', 'x.conf', undefined],
    ['bridge.conf', 'x.conf', undefined],
    ['list.conflist', 'x.conflist', undefined],
    ['pre/noname_calico.conflist', 'x.conflist', 'no "name"'],
    ['pre/noplugins_calico.conflist', 'x.conflist', 'no "plugins" key'],
    ['pre/bad_minikube_cni.conf', 'x.conf', 'no "type" (perhaps this is a .conflist?)'],
    ['pre/non_json.conf', 'x.conf', 'not JSON'],
    ['invalid-arr.conflist', 'x.conflist', 'not a JSON object'],
    ['invalid-map.conflist', 'x.conflist', 'no "name"'],
    // A list under a .conf name has no top-level type: libcni skips it.
    ['list.conflist', 'x.conf', 'no "type" (perhaps this is a .conflist?)'],
  ])('%s as %s', (file, name, problem) => {
    const p = libcniProblem(name, fixture(file));
    if (problem === undefined) expect(p).toBeUndefined();
    else expect(p).toContain(problem);
  });

  it('checks types the way Go decodes into types.NetConf', () => {
    expect(libcniProblem('a.conflist', '{"name":"n","plugins":[]}')).toBe('no plugins in the list');
    expect(libcniProblem('a.conflist', '{"name":5,"plugins":[{"type":"x"}]}')).toBe('"name" is not a string');
    expect(libcniProblem('a.conflist', '{"name":"n","plugins":[{"type":""}]}')).toContain('missing "type"');
    expect(libcniProblem('a.conflist', '{"name":"n","plugins":["x"]}')).toContain('not an object');
    expect(libcniProblem('a.conflist', '{"name":"n","plugins":[{"type":"x","ipam":"dhcp"}]}')).toContain('"ipam"');
    expect(libcniProblem('a.conf', '{"type":"x","capabilities":{"portMappings":"yes"}}')).toContain('"capabilities"');
    expect(libcniProblem('a.conf', '{"type":"bridge","name":null,"dns":null}')).toBeUndefined();
  });
});

describe('candidate list (kubelet semantics)', () => {
  it('sorts by name, skips invalid files with a warning, ignores other extensions and directories', async () => {
    const d = dirWith({
      '00-bad.conf': fixture('pre/bad_minikube_cni.conf'), '01-nonjson.conf': fixture('pre/non_json.conf'),
      '02-noname.conflist': fixture('pre/noname_calico.conflist'), '10-calico.conflist': fixture('pre/calico.conflist'),
      '05-minikube.conf': fixture('pre/minikube_cni.conf'), '00-calico.json': fixture('pre/calico.conflist'),
      'calico-kubeconfig': 'x', '20-z.conflist.tmp.abc': fixture('pre/calico.conflist'),
    });
    mkdirSync(join(d, '00-dir.conflist'));
    symlinkSync(join(d, '00-dir.conflist'), join(d, '00-link-to-dir.conf'));
    symlinkSync(join(d, '10-calico.conflist'), join(d, '30-link.conflist'));
    const r = recorder();
    expect(await listCandidates(d, r.log)).toEqual(['05-minikube.conf', '10-calico.conflist', '30-link.conflist']);
    expect(r.warnings()).toHaveLength(3);
  });

  it('sorts by UTF-8 bytes (Go sort.Strings), not UTF-16 units', async () => {
    const a = 'a\u{1F600}.conf';
    const b = 'a\uFF5E.conf';
    expect(compareUtf8(b, a)).toBeLessThan(0);
    expect(await listCandidates(dirWith({ [a]: fixture('bridge.conf'), [b]: fixture('bridge.conf') }))).toEqual([b, a]);
  });

  it('fails typed: no networks / no valid networks / unreadable dir', async () => {
    await expect(listCandidates(dirWith({ 'README': 'x' }))).rejects.toMatchObject({ code: 'ERR_NO_NETWORKS' });
    await expect(listCandidates(dirWith({ 'a.conflist': '{}' }))).rejects.toMatchObject({ code: 'ERR_NO_VALID_NETWORKS' });
    await expect(listCandidates(join(tempDir(), 'missing'))).rejects.toMatchObject({ code: 'ERR_IO', errno: 'ENOENT' });
  });
});

describe('Go JSON encoding', () => {
  it('escapes like encoding/json (HTML characters, U+2028/9, control characters)', () => {
    expect(marshalIndent({ s: '<a&b>\u2028\u2029\b\f\n\r\t\u0001"\\\u007f é 😀' })).toBe(
      '{\n  "s": "\\u003ca\\u0026b\\u003e\\u2028\\u2029\\b\\f\\n\\r\\t\\u0001\\"\\\\\u007f é 😀"\n}',
    );
  });

  it('formats numbers as Go formats a float64', () => {
    expect(marshalIndent([1500, 0.5, 1e21, 1e-7, 0.000001, -0, 12345678901234567890, 1.5e300])).toBe(
      '[\n  1500,\n  0.5,\n  1e+21,\n  1e-7,\n  0.000001,\n  -0,\n  12345678901234567000,\n  1.5e+300\n]',
    );
  });

  it('sorts map keys, keeps struct order, writes {} and []', () => {
    expect(marshalIndent({ b: {}, a: [], '10': null, '9': true })).toBe('{\n  "10": null,\n  "9": true,\n  "a": [],\n  "b": {}\n}');
    expect(marshalIndent(new Ordered([['z', 1], ['a', new Ordered([])]]))).toBe('{\n  "z": 1,\n  "a": {}\n}');
  });
});

describe('primary config path', () => {
  it('uses X.conflist for a missing X.conf and X.conf for a missing X.conflist', async () => {
    const r = recorder();
    const d = dirWith({ '10-calico.conflist': fixture('pre/calico.conflist'), '20-mini.conf': fixture('pre/minikube_cni.conf') });
    expect(await resolvePrimary({ dir: d, name: '10-calico.conf', log: r.log })).toBe(join(d, '10-calico.conflist'));
    expect(await resolvePrimary({ dir: d, name: '20-mini.conflist', log: r.log })).toBe(join(d, '20-mini.conf'));
    expect(await resolvePrimary({ dir: d, name: '', log: r.log })).toBe(join(d, '10-calico.conflist'));
  });

  it('waits for a first config to appear when none is named', async () => {
    const d = tempDir();
    const r = recorder();
    const p = resolvePrimary({ dir: d, name: '', log: r.log });
    await new Promise((res) => setTimeout(res, 50));
    writeFileSync(join(d, '05-bad.conflist'), '{}');
    await new Promise((res) => setTimeout(res, 50));
    // Written atomically, as CNI agents do: the rename is what the watch sees.
    writeFileSync(join(d, '.tmp'), fixture('pre/calico.conflist'));
    renameSync(join(d, '.tmp'), join(d, '10-calico.conflist'));
    expect(await p).toBe(join(d, '10-calico.conflist'));
    expect(r.lines.some((l) => l.msg.startsWith('waiting for a CNI network config file'))).toBe(true);
  });

  it('waits for a named config to exist', async () => {
    const d = tempDir();
    const p = resolvePrimary({ dir: d, name: '10-calico.conflist', log: recorder().log });
    await new Promise((res) => setTimeout(res, 50));
    writeFileSync(join(d, '10-calico.conf'), fixture('pre/minikube_cni.conf'));
    expect(await p).toBe(join(d, '10-calico.conf'));
  });

  it('a wait ends with ERR_STOPPED on abort; a missing dir is ERR_WATCH', async () => {
    const ac = new AbortController();
    const p = resolvePrimary({ dir: tempDir(), name: '', log: recorder().log, signal: ac.signal });
    setTimeout(() => ac.abort(), 30);
    await expect(p).rejects.toMatchObject({ code: 'ERR_STOPPED' });
    await expect(resolvePrimary({ dir: join(tempDir(), 'nope'), name: '', log: recorder().log })).rejects.toMatchObject({ code: 'ERR_WATCH', stage: 'cni-config' });
  });

  it('Istio-owned: never the owned file; the owned file alone is ERR_PRIMARY_UNKNOWN', async () => {
    const d = dirWith({ '02-istio-cni.conflist': fixture('istio-owned.conflist.golden'), '10-calico.conflist': fixture('pre/calico.conflist') });
    expect(await resolvePrimary({ dir: d, name: '', ownedName: '02-istio-cni.conflist', log: recorder().log })).toBe(join(d, '10-calico.conflist'));
    const alone = dirWith({ '02-istio-cni.conflist': fixture('istio-owned.conflist.golden') });
    await expect(resolvePrimary({ dir: alone, name: '', ownedName: '02-istio-cni.conflist', log: recorder().log })).rejects.toMatchObject({ code: 'ERR_PRIMARY_UNKNOWN' });
  });
});
