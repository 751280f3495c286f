// Which file the installer writes (spec §3.3, getCNIConfigFilepath). Standalone: its own file.
// Chained: the primary config — CNI_CONF_NAME, else the name the validity check chose, else the
// first candidate in kubelet order, waiting (watching the directory) until there is one; then,
// while that file does not exist, `X.conf` → `X.conflist` or back when only the other exists,
// else wait for the next directory event. stop() ends a wait (ERR_STOPPED).
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { listCandidates } from './candidates.js';
import { InstallError } from './errors.js';
import type { InstallLog } from './log.js';
import { ChangeWatcher, stopped } from './watch.js';

export interface ConfigState {
  /** The config file this installer last wrote ('' before its first write). */
  writtenPath: string;
  /** The primary config's name: CNI_CONF_NAME, else what the validity check last chose. */
  primaryName: string;
}

export const exists = (path: string) => access(path).then(() => true, () => false);

export interface PrimaryOptions {
  dir: string;
  /** The name to use ('' = the first candidate). */
  name: string;
  /** Istio-owned mode: the owned file's name, never a primary. */
  ownedName?: string | undefined;
  log: InstallLog;
  signal?: AbortSignal | undefined;
}

/**
 * The primary config's path once it exists. Throws InstallError of stage `cni-config`:
 * ERR_WATCH (the directory cannot be watched), ERR_PRIMARY_UNKNOWN (owned mode and the owned
 * file is the only config), ERR_STOPPED.
 */
export async function resolvePrimary(o: PrimaryOptions): Promise<string> {
  // The watch is armed before the first look, so a file written in between is not missed.
  const watcher = new ChangeWatcher([o.dir], 'cni-config');
  if (watcher.watching.length === 0) {
    throw new InstallError('ERR_WATCH', 'cni-config', `cannot watch the CNI config directory ${o.dir}: it does not exist`, { path: o.dir });
  }
  const wait = async () => {
    await watcher.next(o.signal);
    watcher.reset();
  };
  try {
    let name = o.name;
    while (name === '') {
      if (o.signal?.aborted) throw stopped('cni-config');
      let names: string[] = [];
      try {
        names = await listCandidates(o.dir, o.log);
      } catch (err) {
        if (!(err instanceof InstallError) || (err.code !== 'ERR_NO_NETWORKS' && err.code !== 'ERR_NO_VALID_NETWORKS')) throw err;
        o.log.warn(`Istio CNI is configured as chained plugin, but cannot find existing CNI network config: ${err.message}`);
      }
      const primaries = o.ownedName === undefined ? names : names.filter((n) => n !== o.ownedName);
      if (primaries.length > 0) {
        name = primaries[0]!;
        break;
      }
      if (names.length > 0) {
        throw new InstallError('ERR_PRIMARY_UNKNOWN', 'cni-config', `the Istio-owned config ${o.ownedName} is the only CNI config in ${o.dir}: the primary config is unknown`, { path: o.dir });
      }
      o.log.info(`waiting for a CNI network config file to be written in ${o.dir}`);
      await wait();
    }
    let path = join(o.dir, name);
    while (!(await exists(path))) {
      if (o.signal?.aborted) throw stopped('cni-config');
      if (path.endsWith('.conf') && (await exists(`${path}list`))) {
        o.log.info(`${path} doesn't exist, but ${path}list does; using it as the CNI config file instead`);
        path = `${path}list`;
      } else if (path.endsWith('.conflist') && (await exists(path.slice(0, -4)))) {
        o.log.info(`${path} doesn't exist, but ${path.slice(0, -4)} does; using it as the CNI config file instead`);
        path = path.slice(0, -4);
      } else {
        o.log.info(`CNI config file ${path} does not exist; waiting for it to be written`);
        await wait();
      }
    }
    return path;
  } finally {
    watcher.close();
  }
}
