// Required node affinity and nodeSelector as the scheduler evaluates them (pure, no cluster).
import { describe, expect, it } from 'vitest';
import { nodeSelectorMatches, parseInt64, podSpecFitsNode, type NodeSelectorRequirement, type NodeSelectorTerm } from '../../lib/kube/node-affinity.js';

const node = { metadata: { name: 'n1', labels: { zone: 'a', cores: '8', empty: '' } } };
const expr = (key: string, operator: string, values?: string[]): NodeSelectorTerm => ({ matchExpressions: [{ key, operator, ...(values ? { values } : {}) }] });
const matches = (...terms: NodeSelectorTerm[]) => nodeSelectorMatches({ nodeSelectorTerms: terms }, node);

describe('nodeSelectorMatches', () => {
  const cases: [string, NodeSelectorTerm, boolean][] = [
    ['In: value in set', expr('zone', 'In', ['b', 'a']), true],
    ['In: other value', expr('zone', 'In', ['b']), false],
    ['In: absent label', expr('gpu', 'In', ['yes']), false],
    ['NotIn: value in set', expr('zone', 'NotIn', ['a']), false],
    ['NotIn: absent label matches', expr('gpu', 'NotIn', ['yes']), true],
    ['Exists: present with empty value', expr('empty', 'Exists'), true],
    ['Exists: absent', expr('gpu', 'Exists'), false],
    ['DoesNotExist: absent', expr('gpu', 'DoesNotExist'), true],
    ['DoesNotExist: present', expr('zone', 'DoesNotExist'), false],
    ['Gt: 8 > 4', expr('cores', 'Gt', ['4']), true],
    ['Gt: 8 > 8 is false', expr('cores', 'Gt', ['8']), false],
    ['Lt: 8 < 16', expr('cores', 'Lt', ['+16']), true],
    ['Lt: 8 < -1 is false', expr('cores', 'Lt', ['-1']), false],
    ['Gt: absent label', expr('gpu', 'Gt', ['0']), false],
    ['Gt: non-integer node label', expr('zone', 'Gt', ['0']), false],
    ['matchFields metadata.name In', { matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1'] }] }, true],
    ['matchFields metadata.name NotIn', { matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['n1'] }] }, false],
    ['expressions and fields are ANDed', { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }], matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n2'] }] }, false],
    ['expressions within a term are ANDed', { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }, { key: 'gpu', operator: 'Exists' }] }, false],
    ['an empty term matches nothing', {}, false],
    ['a term of empty lists matches nothing', { matchExpressions: [], matchFields: [] }, false],
  ];
  it.each(cases)('%s', (_, term, want) => expect(matches(term)).toBe(want));

  // Malformed requirements make their term match nothing, even where the label would satisfy a lax reading.
  const invalid: [string, NodeSelectorRequirement][] = [
    ['Gt with a non-integer value', { key: 'cores', operator: 'Gt', values: ['4.5'] }],
    ['Gt with two values', { key: 'cores', operator: 'Gt', values: ['1', '2'] }],
    ['Lt out of int64 range', { key: 'cores', operator: 'Lt', values: ['9223372036854775808'] }],
    ['Lt with no values', { key: 'cores', operator: 'Lt', values: [] }],
    ['NotIn with no values', { key: 'zone', operator: 'NotIn', values: [] }],
    ['Exists with values', { key: 'zone', operator: 'Exists', values: ['a'] }],
    ['unknown operator', { key: 'zone', operator: 'Equals', values: ['a'] }],
  ];
  it.each(invalid)('invalid → no match: %s', (_, r) => expect(matches({ matchExpressions: [r] })).toBe(false));

  it('matchFields accepts only metadata.name with exactly one value', () => {
    expect(matches({ matchFields: [{ key: 'metadata.uid', operator: 'NotIn', values: ['x'] }] })).toBe(false);
    expect(matches({ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['n1', 'n2'] }] })).toBe(false);
    expect(matches({ matchFields: [{ key: 'metadata.name', operator: 'Exists' }] })).toBe(false);
  });

  it('terms are ORed, and an invalid term does not spoil a valid one', () => {
    expect(matches(expr('zone', 'In', ['b']), expr('cores', 'Gt', ['2']))).toBe(true);
    expect(matches(expr('cores', 'Gt', ['x']), expr('zone', 'In', ['a']))).toBe(true);
    expect(matches(expr('zone', 'In', ['b']), expr('cores', 'Gt', ['9']))).toBe(false);
  });

  it('an empty term list matches nothing; a node without labels fails In and passes DoesNotExist', () => {
    expect(nodeSelectorMatches({ nodeSelectorTerms: [] }, node)).toBe(false);
    expect(nodeSelectorMatches({}, node)).toBe(false);
    expect(nodeSelectorMatches({ nodeSelectorTerms: [expr('zone', 'In', ['a'])] }, { metadata: { name: 'x' } })).toBe(false);
    expect(nodeSelectorMatches({ nodeSelectorTerms: [expr('zone', 'DoesNotExist')] }, {})).toBe(true);
  });
});

it('parseInt64 follows strconv.ParseInt(s, 10, 64)', () => {
  expect(parseInt64('-9223372036854775808')).toBe(-(2n ** 63n));
  expect(parseInt64('9223372036854775807')).toBe(2n ** 63n - 1n);
  expect(parseInt64('007')).toBe(7n);
  for (const bad of ['', '+', '1e3', '0x10', '1_000', ' 1', '-9223372036854775809']) expect(parseInt64(bad)).toBeUndefined();
});

describe('podSpecFitsNode', () => {
  const affinity = (term: NodeSelectorTerm) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [term] } } });

  it('no constraints fit any node', () => {
    expect(podSpecFitsNode(undefined, node)).toEqual({ fits: true });
    expect(podSpecFitsNode({ affinity: { nodeAffinity: {} } }, node)).toEqual({ fits: true });
  });

  it('nodeSelector: every label equal', () => {
    expect(podSpecFitsNode({ nodeSelector: { zone: 'a', empty: '' } }, node)).toEqual({ fits: true });
    expect(podSpecFitsNode({ nodeSelector: { zone: 'b' } }, node)).toEqual({ fits: false, by: 'nodeSelector' });
    expect(podSpecFitsNode({ nodeSelector: { gpu: '' } }, node)).toEqual({ fits: false, by: 'nodeSelector' });
  });

  it('required affinity, and both constraints together', () => {
    expect(podSpecFitsNode({ affinity: affinity(expr('zone', 'In', ['a'])) }, node)).toEqual({ fits: true });
    expect(podSpecFitsNode({ affinity: affinity(expr('zone', 'In', ['b'])) }, node)).toEqual({ fits: false, by: 'nodeAffinity' });
    expect(podSpecFitsNode({ nodeSelector: { zone: 'a' }, affinity: affinity(expr('cores', 'Lt', ['4'])) }, node)).toEqual({ fits: false, by: 'nodeAffinity' });
  });
});
