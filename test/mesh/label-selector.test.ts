// Label-selector semantics as Kubernetes defines them, and compile-time validation by code/path.
import { describe, expect, it } from 'vitest';
import { compileLabelSelector, SelectorError } from '../../lib/mesh/index.js';

type Labels = Record<string, string> | undefined;

describe('compileLabelSelector: matching', () => {
  const cases: [string, unknown, Labels, boolean][] = [
    ['undefined selector matches all', undefined, { a: 'b' }, true],
    ['null selector matches all', null, undefined, true],
    ['empty selector matches all', {}, {}, true],
    ['empty lists match all', { matchLabels: {}, matchExpressions: [] }, { x: 'y' }, true],
    ['matchLabels equal', { matchLabels: { a: 'b' } }, { a: 'b', c: 'd' }, true],
    ['matchLabels other value', { matchLabels: { a: 'b' } }, { a: 'c' }, false],
    ['matchLabels missing key', { matchLabels: { a: 'b' } }, {}, false],
    ['matchLabels on undefined labels', { matchLabels: { a: 'b' } }, undefined, false],
    ['matchLabels empty value matches empty label', { matchLabels: { a: '' } }, { a: '' }, true],
    ['matchLabels all must hold', { matchLabels: { a: 'b', c: 'd' } }, { a: 'b' }, false],
    ['In: value in set', { matchExpressions: [{ key: 'a', operator: 'In', values: ['x', 'y'] }] }, { a: 'y' }, true],
    ['In: value not in set', { matchExpressions: [{ key: 'a', operator: 'In', values: ['x'] }] }, { a: 'z' }, false],
    ['In: absent key', { matchExpressions: [{ key: 'a', operator: 'In', values: ['x'] }] }, {}, false],
    ['NotIn: value in set', { matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['x'] }] }, { a: 'x' }, false],
    ['NotIn: value not in set', { matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['x'] }] }, { a: 'y' }, true],
    ['NotIn: absent key matches', { matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['x'] }] }, {}, true],
    ['Exists: present (empty value)', { matchExpressions: [{ key: 'a', operator: 'Exists' }] }, { a: '' }, true],
    ['Exists: absent', { matchExpressions: [{ key: 'a', operator: 'Exists' }] }, { b: 'a' }, false],
    ['DoesNotExist: absent', { matchExpressions: [{ key: 'a', operator: 'DoesNotExist', values: [] }] }, { b: 'x' }, true],
    ['DoesNotExist: present', { matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, { a: 'x' }, false],
    ['labels and expressions AND', { matchLabels: { a: 'b' }, matchExpressions: [{ key: 'c', operator: 'Exists' }] }, { a: 'b' }, false],
    ['labels and expressions both hold', { matchLabels: { a: 'b' }, matchExpressions: [{ key: 'c', operator: 'Exists' }] }, { a: 'b', c: '1' }, true],
    ['prefixed key', { matchLabels: { 'istio.io/dataplane-mode': 'ambient' } }, { 'istio.io/dataplane-mode': 'ambient' }, true],
    ['inherited properties are not labels', { matchExpressions: [{ key: 'constructor', operator: 'Exists' }] }, {}, false],
  ];
  it.each(cases)('%s', (_name, selector, labels, expected) => {
    expect(compileLabelSelector(selector).matches(labels)).toBe(expected);
  });

  it('reports emptiness', () => {
    expect(compileLabelSelector(undefined).empty).toBe(true);
    expect(compileLabelSelector({ matchLabels: {} }).empty).toBe(true);
    expect(compileLabelSelector({ matchLabels: { a: 'b' } }).empty).toBe(false);
    expect(compileLabelSelector({ matchExpressions: [{ key: 'a', operator: 'Exists' }] }).empty).toBe(false);
  });
});

describe('compileLabelSelector: validation', () => {
  const cases: [string, unknown, string][] = [
    ['not an object', 'a=b', 's'],
    ['an array', [], 's'],
    ['unknown field', { matchLabel: { a: 'b' } }, 's'],
    ['matchLabels not an object', { matchLabels: ['a'] }, 's.matchLabels'],
    ['matchLabels value not a string', { matchLabels: { a: 1 } }, 's.matchLabels["a"]'],
    ['matchLabels invalid value', { matchLabels: { a: 'has space' } }, 's.matchLabels["a"]'],
    ['matchLabels value too long', { matchLabels: { a: 'x'.repeat(64) } }, 's.matchLabels["a"]'],
    ['invalid key name', { matchLabels: { '-a': 'b' } }, 's.matchLabels["-a"]'],
    ['invalid key prefix', { matchLabels: { 'Istio_IO/a': 'b' } }, 's.matchLabels["Istio_IO/a"]'],
    ['empty key prefix', { matchLabels: { '/a': 'b' } }, 's.matchLabels["/a"]'],
    ['key name too long', { matchLabels: { ['k'.repeat(64)]: 'b' } }, `s.matchLabels["${'k'.repeat(64)}"]`],
    ['matchExpressions not a list', { matchExpressions: {} }, 's.matchExpressions'],
    ['expression not an object', { matchExpressions: ['a'] }, 's.matchExpressions[0]'],
    ['expression unknown field', { matchExpressions: [{ key: 'a', operator: 'Exists', value: 'x' }] }, 's.matchExpressions[0]'],
    ['expression empty key', { matchExpressions: [{ key: '', operator: 'Exists' }] }, 's.matchExpressions[0].key'],
    ['unknown operator', { matchExpressions: [{ key: 'a', operator: 'Equals', values: ['x'] }] }, 's.matchExpressions[0].operator'],
    ['operator is case-sensitive', { matchExpressions: [{ key: 'a', operator: 'in', values: ['x'] }] }, 's.matchExpressions[0].operator'],
    ['values not a list', { matchExpressions: [{ key: 'a', operator: 'In', values: 'x' }] }, 's.matchExpressions[0].values'],
    ['In without values', { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }, 's.matchExpressions[0].values'],
    ['NotIn without values', { matchExpressions: [{ key: 'a', operator: 'NotIn' }] }, 's.matchExpressions[0].values'],
    ['Exists with values', { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }, 's.matchExpressions[0].values'],
    ['DoesNotExist with values', { matchExpressions: [{ key: 'a', operator: 'DoesNotExist', values: ['x'] }] }, 's.matchExpressions[0].values'],
    ['invalid value in values', { matchExpressions: [{ key: 'b', operator: 'In', values: ['ok', 'not ok'] }] }, 's.matchExpressions[0].values[1]'],
  ];
  it.each(cases)('%s', (_name, selector, path) => {
    let err: unknown;
    try {
      compileLabelSelector(selector, 's');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SelectorError);
    expect(err).toMatchObject({ code: 'ERR_INVALID_SELECTOR', path });
  });
});
