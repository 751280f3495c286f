// Writing the CNI config (spec §3.2, §3.3; createCNIConfigFile). Standalone: the plugin entry
// as its own file. Chained: the primary config with the entry merged in, written back in place
// with the primary's mode; a `.conf` primary becomes `<name>.conflist`. Istio-owned: the same
// merge written to the owned file (0600, or 0640 with CNI_CONF_GROUP_READ), the primary never
// touched. Every write is atomic.
import { readFile, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic, syncDir } from '../util/atomic-write.js';
import type { InstallConfig } from './config.js';
import { DEFAULT_STANDALONE_FILENAME } from './config.js';
import { resolvePrimary, type ConfigState } from './config-path.js';
import { insertEntry } from './conflist.js';
import { InstallError, ioError } from './errors.js';
import type { InstallLog } from './log.js';

/** The mode of configs the installer owns (standalone, Istio-owned). */
export const ownedMode = (cfg: Pick<InstallConfig, 'cniConfGroupRead'>) => (cfg.cniConfGroupRead ? 0o640 : 0o600);

/** The standalone file's path. */
export const standalonePath = (cfg: Pick<InstallConfig, 'mountedCniNetDir' | 'cniConfName'>) =>
  join(cfg.mountedCniNetDir, cfg.cniConfName || DEFAULT_STANDALONE_FILENAME);

export interface WrittenConfig {
  /** The file written. */
  path: string;
  /** The primary config merged (chained), or `path` (standalone). */
  primary: string;
}

export async function writeCniConfig(cfg: InstallConfig, state: ConfigState, entry: string, log: InstallLog, signal?: AbortSignal): Promise<WrittenConfig> {
  if (!cfg.chainedCniPlugin) {
    const path = standalonePath(cfg);
    await write(path, entry, ownedMode(cfg));
    log.info(`created CNI config ${path}`);
    return { path, primary: path };
  }
  const primary = await resolvePrimary({
    dir: cfg.mountedCniNetDir,
    name: state.primaryName || cfg.cniConfName,
    ownedName: cfg.istioOwned ? cfg.istioOwnedCniConfigFilename : undefined,
    log,
    signal,
  });
  let existing: string;
  let mode: number;
  try {
    [existing, mode] = await Promise.all([readFile(primary, 'utf8'), stat(primary).then((s) => s.mode & 0o7777)]);
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') {
      throw new InstallError('ERR_CNI_CONFIG_REMOVED', 'cni-config', `CNI config file ${primary} removed during configuration`, { path: primary, cause: err });
    }
    throw ioError('cni-config', 'cannot read the CNI config', primary, err);
  }
  const merged = insertEntry(entry, existing, cfg.cniPluginName);
  let path: string;
  if (cfg.istioOwned) {
    path = join(cfg.mountedCniNetDir, cfg.istioOwnedCniConfigFilename);
    await write(path, merged, ownedMode(cfg));
  } else if (primary.endsWith('.conf')) {
    // The merged text is a list: written into X.conf, then X.conf is renamed to X.conflist
    // (upstream's order; for that moment the runtime skips X.conf, it never loads a stale one).
    await write(primary, merged, mode);
    path = `${primary}list`;
    try {
      await rename(primary, path);
    } catch (err) {
      throw ioError('cni-config', 'cannot rename the CNI config to .conflist', primary, err);
    }
    await syncDir(cfg.mountedCniNetDir);
    log.info(`renamed ${primary} to ${path} (a plugin list)`);
  } else {
    path = primary;
    await write(path, merged, mode);
  }
  log.info(`created CNI config ${path}`, { primary });
  return { path, primary };
}

async function write(path: string, text: string, mode: number): Promise<void> {
  try {
    await writeFileAtomic(path, text, { mode, mkdir: false, tmp: 'suffix' });
  } catch (err) {
    throw ioError('cni-config', 'cannot write the CNI config', path, err);
  }
}
