// The agent's logger: Istio's JSON and text line shapes, levels per scope, and values of every
// shape written without throwing and without raw line breaks. Pure unit tests (no root).
import { describe, expect, it } from 'vitest';
import { createLogging, LOG_SCOPES, podFields, type LogLevel, type LoggingOptions } from '../../lib/util/log.js';
import { NetError } from '../../lib/net/errors.js';
import { ConfigError } from '../../lib/agent/config.js';

const T = new Date('2026-12-01T10:00:00.123Z');

function setup(opts: Partial<LoggingOptions> & { levels?: Record<string, LogLevel> } = {}) {
  const lines: string[] = [];
  const logging = createLogging({ levels: { default: 'debug' }, json: true, now: () => T, sink: { write: (l: string) => lines.push(l) }, ...opts });
  const json = () => lines.map((l) => {
    expect(l.endsWith('\n')).toBe(true);
    expect(l.slice(0, -1)).not.toMatch(/[\n\r\u2028\u2029\u0085]/);
    return JSON.parse(l) as Record<string, unknown>;
  });
  return { logging, lines, json };
}

describe('JSON lines', () => {
  it('have Istio zap keys in order: level, time, scope, msg, then fields', () => {
    const { logging, lines, json } = setup();
    logging.scope('cni-agent').info('received hello from ztunnel', { conn_uuid: 'u-1', version: 'V1' });
    expect(lines[0]).toBe('{"level":"info","time":"2026-12-01T10:00:00.123000Z","scope":"cni-agent","msg":"received hello from ztunnel","conn_uuid":"u-1","version":"V1"}\n');
    expect(Object.keys(json()[0]!)).toEqual(['level', 'time', 'scope', 'msg', 'conn_uuid', 'version']);
  });

  it('writes every level by name', () => {
    const { logging, json } = setup();
    const log = logging.scope('cni-plugin');
    log.debug('d');
    log.info('i');
    log.warn('w');
    log.error('e');
    log.fatal('f');
    expect(json().map((o) => [o.level, o.scope, o.msg])).toEqual([
      ['debug', 'cni-plugin', 'd'], ['info', 'cni-plugin', 'i'], ['warn', 'cni-plugin', 'w'], ['error', 'cni-plugin', 'e'], ['fatal', 'cni-plugin', 'f'],
    ]);
  });

  it('serialises Errors as message (+ code), bigint as decimal, drops undefined, keeps null', () => {
    const { logging, json } = setup();
    const net = new NetError('IPSET_CMD_LIST istio-inpod-probes-v4: no such set', { errno: 2, op: 'IPSET_CMD_LIST' });
    logging.scope('cni-agent').error('failed', {
      err: net, plain: new Error('boom'), cfg: new ConfigError('AMBIENT_IPV6', 'yes', 'is not a boolean'),
      big: 2n ** 70n, gone: undefined, nothing: null, n: 1.5, nan: NaN, inf: -Infinity, ok: true,
      when: new Date('2026-01-02T03:04:05.006Z'), bytes: Buffer.from([0xde, 0xad]), set: new Set([1, 2]), map: new Map([['a', 1n]]),
      nested: { e: new TypeError('bad'), list: [1, undefined, 'x'] },
    });
    const o = json()[0]!;
    expect(o.err).toBe('IPSET_CMD_LIST istio-inpod-probes-v4: no such set (ENOENT)');
    expect(o.plain).toBe('boom');
    expect(o.cfg).toBe('AMBIENT_IPV6="yes": is not a boolean (ERR_AGENT_CONFIG)');
    expect(o.big).toBe('1180591620717411303424');
    expect('gone' in o).toBe(false);
    expect(o.nothing).toBeNull();
    expect(o).toMatchObject({ n: 1.5, nan: 'NaN', inf: '-Inf', ok: true, when: '2026-01-02T03:04:05.006Z', bytes: 'dead', set: [1, 2], map: { a: '1' } });
    expect(o.nested).toEqual({ e: 'bad', list: [1, null, 'x'] });
  });

  it('never throws on circular, deep, huge, throwing or hostile values', () => {
    const { logging, json } = setup();
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    a.list = [a, { back: a }];
    let deep: Record<string, unknown> = {};
    const root = deep;
    for (let i = 0; i < 50; i++) deep = (deep.next = {}) as Record<string, unknown>;
    const getter = Object.defineProperty({}, 'x', { enumerable: true, get() { throw new Error('no'); } });
    const proxy = new Proxy({}, { ownKeys() { throw new Error('trap'); }, getPrototypeOf() { throw new Error('trap'); } });
    const badJson = { toJSON() { throw new Error('nope'); } };
    const shared = { v: 1 };
    const log = logging.scope('cni-agent');
    expect(() => log.info('x', { a, root, getter, proxy, badJson, dag: [shared, shared], arr: Array.from({ length: 500 }, (_, i) => i), sym: Symbol('s'), fn: function named() {} })).not.toThrow();
    expect(() => log.info('fields that throw', proxy as Record<string, unknown>)).not.toThrow();
    const [o, p] = json();
    expect(o!.a).toEqual({ name: 'a', self: '[Circular]', list: ['[Circular]', { back: '[Circular]' }] });
    expect(JSON.stringify(o!.root)).toContain('"[…]"');
    expect(o!.getter).toEqual({ x: '[unreadable]' });
    expect(o!.proxy).toBe('[unserializable]');
    expect(o!.badJson).toBe('[unserializable]');
    expect(o!.dag).toEqual([{ v: 1 }, { v: 1 }]);   // shared, not circular
    expect((o!.arr as unknown[]).length).toBe(101);
    expect((o!.arr as unknown[])[100]).toBe('…(400 more)');
    expect(o).toMatchObject({ sym: 'Symbol(s)', fn: '[function named]' });
    expect(p!.msg).toBe('fields that throw');
  });

  it('never writes a raw line break: messages, keys and values are escaped', () => {
    const { logging, lines, json } = setup();
    logging.scope('cni-agent').warn('line1\nline2\r\u2028\u2029\u0085end', { 'k\ney': 'v\nv', deep: { s: 'a\u2028b' } });
    expect(lines[0]!.split('\n')).toHaveLength(2);
    const o = json()[0]!;
    expect(o.msg).toBe('line1\nline2\r\u2028\u2029\u0085end');   // round-trips through JSON escapes
    expect(o['k\ney']).toBe('v\nv');
    expect(o.deep).toEqual({ s: 'a\u2028b' });
  });

  it('with() binds fields; the call wins; Istio keys in fields do not clobber the line', () => {
    const { logging, json } = setup();
    const base = logging.scope('cni-agent').with(podFields({ namespace: 'default', name: 'app-1', uid: 'u1' }));
    const more = base.with({ step: 'zds' });
    more.info('sending pod add to ztunnel', { step: 'ack', level: 'spoof', msg: 'spoof' });
    base.info('plain');
    const [a, b] = json();
    expect(a).toEqual({ level: 'info', time: '2026-12-01T10:00:00.123000Z', scope: 'cni-agent', msg: 'sending pod add to ztunnel', pod: 'default/app-1', uid: 'u1', step: 'ack', _level: 'spoof', _msg: 'spoof' });
    expect(Object.keys(a!)).toEqual(['level', 'time', 'scope', 'msg', 'pod', 'uid', 'step', '_level', '_msg']);
    expect(b).toEqual({ level: 'info', time: '2026-12-01T10:00:00.123000Z', scope: 'cni-agent', msg: 'plain', pod: 'default/app-1', uid: 'u1' });
  });

  it('log() replays at a given level with the original time, microseconds kept', () => {
    const { logging, json } = setup();
    const plugin = logging.scope('cni-plugin');
    plugin.log('info', 'replayed', { pod: 'ns/p', if: 'eth0' }, '2026-11-30T23:59:59.654321Z');
    plugin.log('warn', 'offset', undefined, '2026-12-01T12:00:00.5+02:00');
    plugin.log('error', 'as Date', undefined, new Date('2026-12-01T00:00:00.001Z'));
    plugin.log('debug', 'bad time falls back to the clock', undefined, 'yesterday');
    plugin.log('none' as never, 'not a level');
    plugin.log('trace' as never, 'not a level');
    expect(json().map((o) => [o.level, o.time, o.msg])).toEqual([
      ['info', '2026-11-30T23:59:59.654321Z', 'replayed'],
      ['warn', '2026-12-01T10:00:00.500000Z', 'offset'],
      ['error', '2026-12-01T00:00:00.001000Z', 'as Date'],
      ['debug', '2026-12-01T10:00:00.123000Z', 'bad time falls back to the clock'],
    ]);
  });

  it('survives a throwing sink and a broken clock', () => {
    const boom = createLogging({ levels: {}, json: true, sink: { write() { throw new Error('EPIPE'); } } });
    expect(() => boom.scope('cni-agent').info('x')).not.toThrow();
    const lines: string[] = [];
    const clock = createLogging({ levels: {}, json: true, now: () => { throw new Error('clock'); }, sink: { write: (l: string) => lines.push(l) } });
    clock.scope('cni-agent').info('still written');
    expect(JSON.parse(lines[0]!).time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}000Z$/);
    const invalid: string[] = [];
    createLogging({ levels: {}, json: false, now: () => new Date(NaN), sink: { write: (l: string) => invalid.push(l) } }).scope('cni-agent').info('y');
    expect(invalid[0]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z\tinfo\tcni-agent\ty\n$/);
  });

  it('defaults to the system clock and process.stderr', () => {
    const logging = createLogging({ levels: { default: 'none' }, json: true });
    expect(() => logging.scope('cni-agent').info('silenced')).not.toThrow();
  });
});

describe('text lines', () => {
  it('are time, level, scope, msg and key=value labels, tab-separated (Istio console format)', () => {
    const { logging, lines } = setup({ json: false });
    const log = logging.scope('cni-agent');
    log.info('new ztunnel connected, total connected: 1');
    log.info('pod added', { pod: 'default/app-1', uid: 'u1', n: 3, big: 5n, ok: false });
    expect(lines).toEqual([
      '2026-12-01T10:00:00.123000Z\tinfo\tcni-agent\tnew ztunnel connected, total connected: 1\n',
      '2026-12-01T10:00:00.123000Z\tinfo\tcni-agent\tpod added\tpod=default/app-1 uid=u1 n=3 big=5 ok=false\n',
    ]);
  });

  it('quotes values with spaces, quotes, backslashes or control characters, and empty ones', () => {
    const { logging, lines } = setup({ json: false });
    logging.scope('cni-agent').error('apply failed', {
      err: new NetError('RTM_NEWROUTE: File exists', { errno: 17, op: 'RTM_NEWROUTE' }),
      q: 'say "hi"', bs: 'a\\b', nl: 'a\nb', empty: '', obj: { a: 1 }, list: [1, 2], plain: 'x=y',
    });
    const [, , , msg, labels] = lines[0]!.slice(0, -1).split('\t');
    expect(msg).toBe('apply failed');
    expect(labels).toBe('err="RTM_NEWROUTE: File exists (EEXIST)" q="say \\"hi\\"" bs="a\\\\b" nl="a\\nb" empty="" obj="{\\"a\\":1}" list=[1,2] plain=x=y');
  });

  it('escapes line breaks and tabs in messages and keys, so one entry is one line of 4–5 columns', () => {
    const { logging, lines } = setup({ json: false });
    logging.scope('cni-plugin').warn('a\nb\tc\r\u2028d\u0001', { 'bad key\n': 'v', '': 'e' });
    expect(lines[0]!.split('\n')).toHaveLength(2);
    expect(lines[0]).toBe('2026-12-01T10:00:00.123000Z\twarn\tcni-plugin\ta\\nb\\tc\\r\\u2028d\\u0001\tbad_key_=v _=e\n');
  });
});

describe('levels', () => {
  it('per scope, with default for unnamed scopes and info when default is absent', () => {
    const { logging, json } = setup({ levels: { default: 'warn', 'cni-plugin': 'debug' } });
    const agent = logging.scope('cni-agent');
    const plugin = logging.scope('cni-plugin');
    agent.info('hidden');
    agent.warn('shown');
    plugin.debug('shown too');
    expect(json().map((o) => o.msg)).toEqual(['shown', 'shown too']);
    expect([logging.level('cni-agent'), logging.level('cni-plugin')]).toEqual(['warn', 'debug']);
    expect(createLogging({ levels: {}, json: true }).level('cni-agent')).toBe('info');
    expect(createLogging({ levels: { 'cni-agent': 'error' }, json: true }).level('cni-plugin')).toBe('info');
  });

  it('enabled() follows debug < info < warn < error < fatal; none silences a scope', () => {
    const { logging, lines } = setup({ levels: { default: 'error', 'cni-plugin': 'none' } });
    const agent = logging.scope('cni-agent');
    expect((['debug', 'info', 'warn', 'error', 'fatal'] as const).map((l) => agent.enabled(l))).toEqual([false, false, false, true, true]);
    expect(agent.enabled('none' as never)).toBe(false);
    const plugin = logging.scope('cni-plugin');
    expect((['debug', 'info', 'warn', 'error', 'fatal'] as const).some((l) => plugin.enabled(l))).toBe(false);
    plugin.fatal('silenced');
    plugin.log('error', 'silenced');
    expect(lines).toEqual([]);
    const fatalOnly = setup({ levels: { default: 'fatal' } });
    fatalOnly.logging.scope('cni-agent').error('no');
    fatalOnly.logging.scope('cni-agent').fatal('yes');
    expect(fatalOnly.json().map((o) => o.msg)).toEqual(['yes']);
  });

  it('reads the levels given at creation, not later changes to that object', () => {
    const levels: Record<string, LogLevel> = { default: 'info' };
    const { logging, lines } = setup({ levels });
    levels.default = 'none';
    logging.scope('cni-agent').info('still shown');
    expect(lines).toHaveLength(1);
  });

  it('an unknown scope name is refused (only Istio\'s scopes exist)', () => {
    const { logging } = setup();
    expect(LOG_SCOPES).toEqual(['cni-agent', 'cni-plugin']);
    expect(() => logging.scope('ztunnel' as never)).toThrow(TypeError);
    expect(logging.scope('cni-agent').scope).toBe('cni-agent');
  });
});

describe('podFields', () => {
  it('puts pod=ns/name and the uid when known', () => {
    expect(podFields({ namespace: 'default', name: 'app', uid: 'u' })).toEqual({ pod: 'default/app', uid: 'u' });
    expect(podFields({ namespace: 'default', name: 'app' })).toEqual({ pod: 'default/app' });
    expect(podFields({ name: 'app' })).toEqual({ pod: 'app' });
    expect(podFields({ uid: 'u' })).toEqual({ uid: 'u' });
    expect(podFields({})).toEqual({});
  });
});

describe('odd keys', () => {
  it('a field named __proto__ is an ordinary key', () => {
    const lines: string[] = [];
    const log = createLogging({ levels: {}, json: true, now: () => T, sink: { write: (l: string) => lines.push(l) } }).scope('cni-agent');
    const fields = JSON.parse('{"__proto__": "p", "a": 1}') as Record<string, unknown>;
    log.with(fields).info('x', { a: 2 });
    const o = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(Object.keys(o)).toEqual(['level', 'time', 'scope', 'msg', '__proto__', 'a']);
    expect(Object.getOwnPropertyDescriptor(o, '__proto__')?.value).toBe('p');
    expect(o.a).toBe(2);
  });
});
