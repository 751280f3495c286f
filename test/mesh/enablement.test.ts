// Istio's enablement selectors: the chart default and the first-match / namespace-only rules (spec §2.4).
import { describe, expect, it } from 'vitest';
import { compileEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS, SelectorError } from '../../lib/mesh/index.js';

type Labels = Record<string, string> | undefined;
const AMBIENT = { 'istio.io/dataplane-mode': 'ambient' };
const NONE = { 'istio.io/dataplane-mode': 'none' };

describe('DEFAULT_ENABLEMENT_SELECTORS', () => {
  const d = compileEnablementSelectors(DEFAULT_ENABLEMENT_SELECTORS);
  const cases: [string, Labels, Labels, number][] = [
    ['pod labelled ambient, plain namespace', AMBIENT, {}, 0],
    ['pod labelled ambient, namespace labelled too (first pair wins)', AMBIENT, AMBIENT, 0],
    ['unlabelled pod in ambient namespace', {}, AMBIENT, 1],
    ['pod without labels in ambient namespace', undefined, AMBIENT, 1],
    ['pod with another dataplane-mode in ambient namespace', { 'istio.io/dataplane-mode': 'sidecar' }, AMBIENT, 1],
    ['pod opting out with none', NONE, AMBIENT, -1],
    ['unlabelled pod in plain namespace', {}, {}, -1],
    ['namespace labelled none', {}, NONE, -1],
    ['namespace label value other than ambient', {}, { 'istio.io/dataplane-mode': 'Ambient' }, -1],
  ];
  it.each(cases)('%s', (_name, pod, ns, index) => {
    expect(d.match(pod, ns)).toBe(index);
  });

  it('matchesNamespace only counts non-empty namespace selectors', () => {
    expect(d.matchesNamespace(AMBIENT)).toBe(true);
    expect(d.matchesNamespace({})).toBe(false); // pair 0's empty namespaceSelector does not count
    expect(d.matchesNamespace(undefined)).toBe(false);
  });

  it('is frozen, so no caller can change the default for everyone', () => {
    expect(Object.isFrozen(DEFAULT_ENABLEMENT_SELECTORS)).toBe(true);
  });
});

describe('compileEnablementSelectors', () => {
  it('an empty list selects nothing', () => {
    const s = compileEnablementSelectors([]);
    expect(s.size).toBe(0);
    expect(s.match({}, {})).toBe(-1);
    expect(s.matchesNamespace(AMBIENT)).toBe(false);
  });

  it('a pair with neither selector matches every pod', () => {
    const s = compileEnablementSelectors([{}]);
    expect(s.match(undefined, undefined)).toBe(0);
    expect(s.matchesNamespace({})).toBe(false);
  });

  it('needs both sides of a pair to match', () => {
    const s = compileEnablementSelectors([{ podSelector: { matchLabels: { app: 'a' } }, namespaceSelector: { matchLabels: { team: 't' } } }]);
    expect(s.match({ app: 'a' }, { team: 't' })).toBe(0);
    expect(s.match({ app: 'a' }, {})).toBe(-1);
    expect(s.match({}, { team: 't' })).toBe(-1);
    expect(s.matchesNamespace({ team: 't' })).toBe(true);
  });

  const bad: [string, unknown, string][] = [
    ['not a list', { podSelector: {} }, 'selectors'],
    ['null entry', [null], '[0]'],
    ['list entry', [[]], '[0]'],
    ['unknown entry field', [{ podSelectors: {} }], '[0]'],
    ['bad pod selector', [{}, { podSelector: { matchLabels: { a: 'b c' } } }], '[1].podSelector.matchLabels["a"]'],
    ['bad namespace selector', [{ namespaceSelector: { matchExpressions: [{ key: 'a', operator: 'X' }] } }], '[0].namespaceSelector.matchExpressions[0].operator'],
  ];
  it.each(bad)('rejects %s', (_name, input, path) => {
    let err: unknown;
    try {
      compileEnablementSelectors(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SelectorError);
    expect(err).toMatchObject({ code: 'ERR_INVALID_SELECTOR', path });
  });
});
