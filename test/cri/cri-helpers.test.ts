// The pieces of the CRI harness that need no root: the proto3 codec against
// hand-computed bytes, the OCI image tarball (read back with the system tar,
// digests checked), and the plan that hides host paths from containerd.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hidingPlan, resolveUnder } from '../helpers/containerd.js';
import { buildOciImage, tar } from '../helpers/oci-image.js';
import { decode, encode, message, ProtobufError } from '../helpers/protobuf.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), `pwt-cri-${process.pid}-`));
  dirs.push(d);
  return d;
}

describe('protobuf codec', () => {
  const Inner = message('Inner', { value: [1, 'int64'] });
  const M = message('M', {
    s: [1, 'string'], n: [2, 'int32'], u: [3, 'uint32'], b: [4, 'bool'], inner: [5, Inner], list: [6, 'string', 'repeated'],
    labels: [7, 'map'], nums: [8, 'int64', 'repeated'], raw: [9, 'bytes'], subs: [10, Inner, 'repeated'],
  });

  it('writes proto3 bytes: implicit presence, maps as entries, negative ints as ten bytes', () => {
    expect(encode(M, { s: 'v1' }).toString('hex')).toBe('0a027631');
    expect(encode(M, { s: '', n: 0, b: false, list: [] }).length).toBe(0);
    expect(encode(M, { n: -1 }).toString('hex')).toBe('10ffffffffffffffffff01');
    expect(encode(M, { u: 300, b: true }).toString('hex')).toBe('18ac022001');
    expect(encode(M, { inner: {} }).toString('hex')).toBe('2a00'); // a set message is written even when empty
    expect(encode(M, { labels: { a: 'b' } }).toString('hex')).toBe('3a060a01611201' + '62');
    expect(encode(M, { list: ['x', ''] }).toString('hex')).toBe('320178' + '3200');
    expect(() => encode(M, { nope: 1 })).toThrow(TypeError);
    expect(() => encode(M, { n: 2 ** 31 })).toThrow(RangeError);
  });

  it('reads back what it writes, fills defaults, skips unknown fields, takes packed repeats', () => {
    const v = { s: 'é', n: -5, u: 7, b: true, inner: { value: 1796124681842133107n }, list: ['a', 'b'], labels: { k: 'v', x: '' },
      nums: [1n, -2n], raw: Buffer.from([0, 1]), subs: [{ value: 0n }, { value: 3n }] };
    expect(decode(M, encode(M, v))).toEqual(v);
    expect(decode(M, Buffer.alloc(0))).toEqual({ s: '', n: 0, u: 0, b: false, inner: undefined, list: [], labels: {}, nums: [], raw: Buffer.alloc(0), subs: [] });
    // unknown varint (field 15), fixed64 (16), fixed32 (17) and LEN (18) fields, then s
    const unknown = Buffer.from('7801' + '8101' + '0000000000000000' + '8d01' + '00000000' + '920102abcd' + '0a0161', 'hex');
    expect(decode(M, unknown).s).toBe('a');
    expect(decode(M, Buffer.from('4203' + '01' + '02' + '03', 'hex')).nums).toEqual([1n, 2n, 3n]);
  });

  it('rejects truncated and malformed input with ProtobufError', () => {
    for (const hex of ['0a05', '10ff', '0a', '00', 'ffffffffffffffffffffff01', '0b']) {
      expect(() => decode(M, Buffer.from(hex, 'hex')), hex).toThrow(ProtobufError);
    }
  });
});

describe('OCI image tarball', () => {
  it('tar() writes archives the system tar reads', () => {
    const d = tmp();
    const long = `${'d'.repeat(80)}/${'f'.repeat(60)}`;
    const file = join(d, 'a.tar');
    mkdirSync(join(d, 'x'));
    writeFileSync(file, tar([
      { name: 'bin', type: 'dir' }, { name: 'bin/hello', type: 'file', data: Buffer.from('hi\n'), mode: 0o755 },
      { name: 'bin/sh', type: 'symlink', linkname: 'hello' }, { name: long, type: 'file', data: Buffer.alloc(513, 1) },
    ]));
    expect(execFileSync('tar', ['-tf', file], { encoding: 'utf8' }).trim().split('\n')).toEqual(['bin/', 'bin/hello', 'bin/sh', long]);
    execFileSync('tar', ['-xf', file, '-C', join(d, 'x')]);
    expect(readFileSync(join(d, 'x', 'bin', 'sh'), 'utf8')).toBe('hi\n');
    expect(readFileSync(join(d, 'x', long)).length).toBe(513);
  });

  it('is a deterministic OCI layout whose blobs match their digests', () => {
    const def = { ref: 'localhost/t/img:1', entrypoint: ['/x'], files: [{ dst: '/x', data: Buffer.from('#!/bin/sh\n') }], symlinks: { '/bin/y': '/x' } };
    const a = buildOciImage(def);
    expect(buildOciImage(def).equals(a)).toBe(true);
    const d = tmp();
    writeFileSync(join(d, 'img.tar'), a);
    execFileSync('tar', ['-xf', join(d, 'img.tar'), '-C', d]);
    for (const b of readdirSync(join(d, 'blobs', 'sha256'))) {
      expect(createHash('sha256').update(readFileSync(join(d, 'blobs', 'sha256', b))).digest('hex')).toBe(b);
    }
    const index = JSON.parse(readFileSync(join(d, 'index.json'), 'utf8'));
    expect(index.manifests[0].annotations['io.containerd.image.name']).toBe('localhost/t/img:1');
    const manifest = JSON.parse(readFileSync(join(d, 'blobs', 'sha256', index.manifests[0].digest.slice(7)), 'utf8'));
    const layer = join(d, 'blobs', 'sha256', manifest.layers[0].digest.slice(7));
    expect(execFileSync('tar', ['-tvf', layer], { encoding: 'utf8' })).toMatch(/bin\/y -> \/x/);
  });
});

describe('host path hiding plan', () => {
  it('tmpfs over existing dirs; a private copy of the parent for missing ones; symlinks resolved', () => {
    const d = tmp();
    mkdirSync(join(d, 'run', 'netns'), { recursive: true });
    mkdirSync(join(d, 'var', 'lib'), { recursive: true });
    symlinkSync(join(d, 'run'), join(d, 'var', 'run'));
    const one = hidingPlan([join(d, 'var/run/netns'), join(d, 'var/lib/cni')]);
    expect(one.tmpfs).toEqual([join(d, 'run/netns')]);
    expect([...one.privatize]).toEqual([[join(d, 'var/lib'), new Set(['cni'])]]);
    // a missing sibling turns /run into a private copy that also makes netns fresh
    const two = hidingPlan([join(d, 'var/run/netns'), join(d, 'run/containerd')]);
    expect(two.tmpfs).toEqual([]);
    expect([...two.privatize]).toEqual([[join(d, 'run'), new Set(['containerd', 'netns'])]]);
  });

  it('resolveUnder follows absolute symlinks inside the given root', () => {
    const d = tmp();
    mkdirSync(join(d, 'run', 'netns'), { recursive: true });
    mkdirSync(join(d, 'var'));
    symlinkSync('/run', join(d, 'var', 'run')); // absolute, as Debian's /var/run
    expect(resolveUnder(d, '/var/run/netns/cni-1')).toBe(join(d, 'run/netns/cni-1'));
    expect(resolveUnder(d, 'var/../run/./netns')).toBe(join(d, 'run/netns'));
  });
});
