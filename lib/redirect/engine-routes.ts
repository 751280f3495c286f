// The routing half of a rule set: the `local default dev lo table N` routes,
// the `fwmark … lookup N` policy rules and the addresses a model needs, read,
// compared and written over the netns's rtnetlink handle. IPv6 parts only
// when IPv6 is enabled inside that netns (as Istio reads it in the pod).
import { isExist, isNotFound } from '../net/errors.js';
import { parsePrefix } from '../net/ip.js';
import type { Netns } from '../net/netns/netns.js';
import type { Route, RouteSpec as NlRouteSpec } from '../net/rtnl/routes.js';
import type { Rule as PolicyRule } from '../net/rtnl/rules.js';
import { famText } from './engine-types.js';
import type { AddressSpec, Family, PolicyRuleSpec, RouteSpec, RuleModel } from './model.js';

const ALL_BITS = 0xffffffff;
const hex = (n: number) => `0x${n.toString(16)}`;

// Model routes are immutable: whether one is a default route is parsed once per spec.
const defaultRoutes = new WeakMap<RouteSpec, boolean>();
function isDefault(r: RouteSpec): boolean {
  let d = defaultRoutes.get(r);
  if (d === undefined) {
    d = parsePrefix(r.dst).prefixLen === 0;
    defaultRoutes.set(r, d);
  }
  return d;
}

export const routeText = (r: RouteSpec) => `${famText(r.family)} ${r.type} ${isDefault(r) ? 'default' : r.dst} dev ${r.dev} table ${r.table}`;
export const policyText = (p: PolicyRuleSpec) =>
  `${famText(p.family)} fwmark ${hex(p.fwmark)}${p.fwmask === undefined ? '' : `/${hex(p.fwmask)}`} lookup ${p.table}${p.priority === undefined ? '' : ` pref ${p.priority}`}`;
const addrText = (a: AddressSpec) => `${famText(a.family)} ${a.address} dev ${a.dev}`;
const liveRouteText = (r: Route) => `ipv${r.family} ${r.type} ${r.dst} dev ${r.dev ?? `#${r.ifindex ?? '?'}`} table ${r.table}`;
const livePolicyText = (r: PolicyRule) =>
  `ipv${r.family} fwmark ${hex(r.fwmark ?? 0)}/${hex(r.fwmask ?? ALL_BITS)} ${r.action} ${r.table} pref ${r.priority}`;

function routeMatches(live: Route, want: RouteSpec): boolean {
  const liveDst = live.dst === 'default' ? 0 : parsePrefix(live.dst).prefixLen;
  return live.family === want.family && live.table === want.table && live.type === want.type && live.dev === want.dev
    && (isDefault(want) ? liveDst === 0 : live.dst === want.dst);
}

function policyMatches(live: PolicyRule, want: PolicyRuleSpec): boolean {
  return live.family === want.family && live.action === 'lookup' && live.table === want.table
    && live.fwmark === want.fwmark && (live.fwmask ?? ALL_BITS) === (want.fwmask ?? ALL_BITS)
    && (want.priority === undefined || live.priority === want.priority)
    && live.src === undefined && live.dst === undefined && live.iif === undefined && live.oif === undefined && !live.not;
}

/** Matches each wanted item with a distinct live one: found, missing, and live ones nobody wanted. */
function pair<W, L>(want: W[], live: L[], matches: (l: L, w: W) => boolean): { present: L[]; missing: W[]; foreign: L[] } {
  if (live.length === 0) return { present: [], missing: [...want], foreign: [] };  // a new pod
  const used = new Set<L>();
  const missing: W[] = [];
  for (const w of want) {
    const hit = live.find((l) => !used.has(l) && matches(l, w));
    if (hit) used.add(hit);
    else missing.push(w);
  }
  return { present: [...used], missing, foreign: live.filter((l) => !used.has(l)) };
}

export interface RoutingDiff {
  families: Family[];
  missingRoutes: RouteSpec[];
  /** Routes in one of our tables that the model does not have. */
  foreignRoutes: Route[];
  presentRoutes: Route[];
  missingRules: PolicyRuleSpec[];
  /** Rules that look up one of our tables but are not the model's (old priority, mask, duplicates). */
  foreignRules: PolicyRule[];
  presentRules: PolicyRule[];
  missingAddresses: AddressSpec[];
  presentAddresses: AddressSpec[];
  /** Link name → ifindex, as read with the diff (empty when nothing was read). */
  ifindex: Map<string, number>;
  /**
   * `lo` when a missing route goes through it and it is down. A runtime may set up a pod's loopback
   * while the chain (and so this plugin) runs — containerd's CNI library attaches its loopback
   * network concurrently with the pod's — and a route through a down device fails with ENETDOWN.
   */
  downLinks: string[];
}

interface RoutingPlan {
  /** The tables the model's routes and policy rules use. */
  tables: number[];
  /** Wanted routes by `family table`, and policy rules by family, in model order. */
  routes: Map<string, RouteSpec[]>;
  rules: Map<Family, PolicyRuleSpec[]>;
}

// Models are immutable and shared by every pod of a configuration: group their routing once.
const plans = new WeakMap<RuleModel, RoutingPlan>();

function routingPlan(model: RuleModel): RoutingPlan {
  let plan = plans.get(model);
  if (!plan) {
    plan = { tables: [...new Set([...model.routes.map((r) => r.table), ...model.policyRules.map((r) => r.table)])], routes: new Map(), rules: new Map() };
    for (const r of model.routes) {
      const k = `${r.family} ${r.table}`;
      plan.routes.set(k, [...(plan.routes.get(k) ?? []), r]);
    }
    for (const r of model.policyRules) plan.rules.set(r.family, [...(plan.rules.get(r.family) ?? []), r]);
    plans.set(model, plan);
  }
  return plan;
}

/** Reads the routing state of the model's tables and compares it with the model. */
export async function diffRouting(ns: Netns, model: RuleModel): Promise<RoutingDiff> {
  const diff: RoutingDiff = {
    families: [], missingRoutes: [], foreignRoutes: [], presentRoutes: [], missingRules: [], foreignRules: [], presentRules: [],
    missingAddresses: [], presentAddresses: [], ifindex: new Map(), downLinks: [],
  };
  if (model.routes.length + model.policyRules.length + model.addresses.length === 0) {
    diff.families = [...model.families];
    return diff;
  }
  const nl = await ns.netlink();
  const plan = routingPlan(model);
  const { tables } = plan;
  // Few requests: one link dump (names ↔ indexes, IPv6 state), one route dump
  // per table (both families), one rule dump (every family).
  const [links, ruleList, ...perTable] = await Promise.all([
    nl.links.list(),
    nl.rules.list(),
    ...tables.map((table) => nl.routes.list({ table, names: false }).catch((err) => {
      // A table that has no route yet does not exist (a strict dump says ENOENT).
      if (isNotFound(err)) return [];
      throw err;
    })),
  ]);
  // IPv6 parts only when IPv6 is enabled inside the pod, as Istio reads it there:
  // lo's disable_ipv6 (writing all.disable_ipv6 sets it on every link, lo included).
  const v6 = model.families.includes(6) && links.find((l) => l.name === 'lo')?.ipv6Disabled === false;
  const families = model.families.filter((f) => f === 4 || v6);
  diff.families = families;
  const wantAddrs = model.addresses.filter((x) => families.includes(x.family));
  diff.ifindex = new Map(links.map((l) => [l.name, l.index]));
  // Live routes get their device names (a new pod has none: no map to build).
  const names = perTable.some((rs) => rs.length > 0) ? new Map(links.map((l) => [l.index, l.name])) : undefined;
  for (const fam of families) {
    tables.forEach((table, i) => {
      const live = names === undefined ? [] : perTable[i]!.filter((r) => r.family === fam)
        .map((r) => (r.ifindex !== undefined && names.has(r.ifindex) ? { ...r, dev: names.get(r.ifindex)! } : r));
      const p = pair(plan.routes.get(`${fam} ${table}`) ?? [], live, routeMatches);
      diff.presentRoutes.push(...p.present);
      diff.missingRoutes.push(...p.missing);
      diff.foreignRoutes.push(...p.foreign);
    });
    const liveRules = ruleList.filter((r) => r.family === fam && r.action === 'lookup' && tables.includes(r.table));
    const p = pair(plan.rules.get(fam) ?? [], liveRules, policyMatches);
    diff.presentRules.push(...p.present);
    diff.missingRules.push(...p.missing);
    diff.foreignRules.push(...p.foreign);
  }
  for (const a of wantAddrs) {
    const p = parsePrefix(a.address);
    let live: Array<{ address: string; prefixLen: number }> = [];
    try {
      live = await nl.addrs.list({ link: a.dev, family: p.family });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const have = live.some((l) => parsePrefix(`${l.address}/${l.prefixLen}`).bytes.equals(p.bytes) && l.prefixLen === p.prefixLen);
    (have ? diff.presentAddresses : diff.missingAddresses).push(a);
  }
  const lo = links.find((l) => l.name === 'lo');
  if (lo && !lo.up && diff.missingRoutes.some((r) => r.dev === 'lo')) diff.downLinks.push('lo');
  return diff;
}

export function routingDrift(d: RoutingDiff): string[] {
  return [
    ...d.missingRoutes.map((r) => `missing route: ${routeText(r)}`),
    ...d.foreignRoutes.map((r) => `foreign route: ${liveRouteText(r)}`),
    ...d.missingRules.map((r) => `missing policy rule: ${policyText(r)}`),
    ...d.foreignRules.map((r) => `foreign policy rule: ${livePolicyText(r)}`),
    ...d.missingAddresses.map((a) => `missing address: ${addrText(a)}`),
  ];
}

// The device by index when the diff knows it: saves a link lookup per route. A default
// destination as 'default' (the same message; the encoder then parses no prefix).
const routeSpecOf = (r: RouteSpec, ifindex: Map<string, number>): NlRouteSpec => ({
  family: r.family, dst: isDefault(r) ? 'default' : r.dst, type: r.type, dev: ifindex.get(r.dev) ?? r.dev, table: r.table, scope: r.scope,
});
const liveRouteSpec = (r: Route): NlRouteSpec => ({
  family: r.family, dst: r.dst, table: r.table,
  ...(r.type === 'unspec' ? {} : { type: r.type }),
  ...(r.ifindex === undefined ? {} : { dev: r.ifindex }),
});
const ruleSpecOf = (p: PolicyRuleSpec) => ({
  family: p.family, fwmark: p.fwmark, table: p.table,
  ...(p.fwmask === undefined ? {} : { mask: p.fwmask }), ...(p.priority === undefined ? {} : { priority: p.priority }),
});
const liveRuleSpec = (r: PolicyRule) => ({
  family: r.family, table: r.table, priority: r.priority,
  ...(r.fwmark === undefined ? {} : { fwmark: r.fwmark, mask: r.fwmask ?? ALL_BITS }),
});

/** Makes the routing state what the model says: adds what is missing, removes foreign entries of our tables. */
export async function applyRouting(ns: Netns, d: RoutingDiff): Promise<string[]> {
  const actions: string[] = [];
  if (d.missingRoutes.length + d.foreignRoutes.length + d.missingRules.length + d.foreignRules.length + d.missingAddresses.length === 0) return actions;
  const nl = await ns.netlink();
  for (const name of d.downLinks) {
    await nl.links.set(name, { up: true });  // what the runtime's loopback setup does too
    actions.push(`link set ${name} up`);
  }
  for (const r of d.foreignRoutes) {
    await nl.routes.del(liveRouteSpec(r)).catch((err) => { if (!isNotFound(err)) throw err; });
    actions.push(`route del ${liveRouteText(r)}`);
  }
  for (const r of d.missingRoutes) {
    await nl.routes.replace(routeSpecOf(r, d.ifindex));
    actions.push(`route replace ${routeText(r)}`);
  }
  for (const r of d.foreignRules) {
    await nl.rules.del(liveRuleSpec(r)).catch((err) => { if (!isNotFound(err)) throw err; });
    actions.push(`rule del ${livePolicyText(r)}`);
  }
  for (const r of d.missingRules) {
    await nl.rules.add(ruleSpecOf(r)).catch((err) => { if (!isExist(err)) throw err; });
    actions.push(`rule add ${policyText(r)}`);
  }
  for (const a of d.missingAddresses) {
    await nl.addrs.add(a.dev, a.address, a.family === 6 ? { noDad: true } : {}).catch((err) => { if (!isExist(err)) throw err; });
    actions.push(`address add ${addrText(a)}`);
  }
  return actions;
}

/** Deletes the model's routes, policy rules and addresses that are present; missing ones are fine. */
export async function removeRouting(ns: Netns, d: RoutingDiff): Promise<string[]> {
  const removed: string[] = [];
  if (d.presentRoutes.length + d.presentRules.length + d.presentAddresses.length === 0) return removed;
  const nl = await ns.netlink();
  const tolerate = (err: unknown) => { if (!isNotFound(err)) throw err; };
  for (const r of d.presentRules) {
    await nl.rules.del(liveRuleSpec(r)).then(() => removed.push(`policy rule ${livePolicyText(r)}`), tolerate);
  }
  for (const r of d.presentRoutes) {
    await nl.routes.del(liveRouteSpec(r)).then(() => removed.push(`route ${liveRouteText(r)}`), tolerate);
  }
  for (const a of d.presentAddresses) {
    await nl.addrs.del(a.dev, a.address).then(() => removed.push(`address ${addrText(a)}`), tolerate);
  }
  return removed;
}
