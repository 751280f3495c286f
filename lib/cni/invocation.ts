// One CNI invocation as the shim forwards it (docs/cni-protocol.md):
// `{command, env: {CNI_*}, config: "<stdin>"}`, checked the way skel checks
// the environment before a plugin runs.
import { CNI_CODES, CniError } from './errors.js';
import { isJsonObject } from '../util/json.js';

export const CNI_COMMANDS = ['ADD', 'DEL', 'CHECK', 'GC', 'STATUS'] as const;
export type CniCommand = (typeof CNI_COMMANDS)[number];

export interface Invocation {
  command: CniCommand;
  containerId: string;
  netns: string;
  ifname: string;
  args: string;
  path: string;
  /** stdin as the runtime gave it. */
  config: string;
}


// What each command needs (skel): ADD/DEL/CHECK need the container and interface; ADD and CHECK a netns.
const NEEDS: Record<CniCommand, readonly string[]> = {
  ADD: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME'],
  DEL: ['CNI_CONTAINERID', 'CNI_IFNAME'],
  CHECK: ['CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME'],
  GC: [],
  STATUS: [],
};

export function parseInvocation(body: Buffer | string): Invocation {
  let doc: unknown;
  try {
    doc = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch (err) {
    throw new CniError(CNI_CODES.DECODE, `plugin request is not JSON: ${(err as Error).message}`);
  }
  if (!isJsonObject(doc) || !isJsonObject(doc.env) || typeof doc.config !== 'string') throw new CniError(CNI_CODES.DECODE, 'plugin request must be {command, env: {...}, config: "<stdin>"}');
  const env = doc.env;
  for (const v of Object.values(env)) if (typeof v !== 'string') throw new CniError(CNI_CODES.INVALID_ENV, 'plugin request env values must be strings');
  const command = doc.command;
  if (typeof command !== 'string' || !(CNI_COMMANDS as readonly string[]).includes(command)) {
    throw new CniError(CNI_CODES.INVALID_ENV, `CNI_COMMAND ${JSON.stringify(command)} is not one of ${CNI_COMMANDS.join(', ')}`);
  }
  const get = (k: string) => (env[k] as string | undefined) ?? '';
  for (const k of NEEDS[command as CniCommand]) if (get(k) === '') throw new CniError(CNI_CODES.INVALID_ENV, `${k} is required for ${command}`);
  return {
    command: command as CniCommand, containerId: get('CNI_CONTAINERID'), netns: get('CNI_NETNS'), ifname: get('CNI_IFNAME'),
    args: get('CNI_ARGS'), path: get('CNI_PATH'), config: doc.config,
  };
}
