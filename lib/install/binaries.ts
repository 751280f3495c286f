// Installing the plugin binary (spec §3.1.1). Upstream copies every regular file of its image's
// /opt/cni/bin (just `istio-cni`); podwire has one binary, `podwire-cni`, installed under a
// configurable name — Istio's `istio-cni` by default, so the conflist entry is Istio's.
// Into each target directory: leftovers `<name>.tmp.*` are removed first, then the copy is
// atomic (temporary in the target directory, chmod to the source's mode, write, fsync, rename).
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic, removeTmpLeftovers } from '../util/atomic-write.js';
import { InstallError, ioError } from './errors.js';
import { SILENT_LOG, type InstallLog } from './log.js';

export interface BinaryInstall {
  /** The binary to install (podwire: build/Release/podwire-cni). */
  source: string;
  /** Its file name in the target directories (the conflist entry's `type`). */
  name: string;
  /** The host's CNI bin directories as mounted here (upstream: /host/opt/cni/bin). */
  targetDirs: readonly string[];
}

/**
 * Copies the binary into every target directory. Returns the names installed (the watch list
 * of the reinstall loop: upstream never extends it later). Throws InstallError of stage
 * `copy-binaries`: ERR_BINARY_SOURCE, ERR_BINARY_TARGET, ERR_IO (`errno` EROFS: a read-only
 * host path, logged with upstream's hint).
 */
export async function copyBinaries(spec: BinaryInstall, log: InstallLog = SILENT_LOG): Promise<string[]> {
  let mode: number;
  let data: Buffer;
  try {
    const st = await stat(spec.source);
    if (!st.isFile()) throw new InstallError('ERR_BINARY_SOURCE', 'copy-binaries', `the plugin binary ${spec.source} is not a regular file`, { path: spec.source });
    mode = st.mode & 0o7777;
    data = await readFile(spec.source);
  } catch (err) {
    if (err instanceof InstallError) throw err;
    throw new InstallError('ERR_BINARY_SOURCE', 'copy-binaries', `cannot read the plugin binary ${spec.source}: ${(err as Error).message}`, { path: spec.source, cause: err });
  }
  for (const dir of spec.targetDirs) {
    const target = join(dir, spec.name);
    try {
      const st = await stat(dir).catch((err: unknown) => {
        throw new InstallError('ERR_BINARY_TARGET', 'copy-binaries', `the CNI bin directory ${dir} cannot be used: ${(err as Error).message}`, { path: dir, cause: err });
      });
      if (!st.isDirectory()) throw new InstallError('ERR_BINARY_TARGET', 'copy-binaries', `the CNI bin directory ${dir} is not a directory`, { path: dir });
      const stale = await removeTmpLeftovers(dir, spec.name);
      if (stale.length > 0) log.info(`removed leftover temporary files in ${dir}`, { files: stale.join(',') });
      await writeFileAtomic(target, data, { mode, mkdir: false, tmp: 'suffix' });
    } catch (err) {
      const e = ioError('copy-binaries', 'cannot install the plugin binary as', target, err);
      if (e.errno === 'EROFS') {
        log.warn('hint: some Kubernetes environments require customization of the CNI directory. Ensure you properly set global.platform=<name> during installation');
      }
      throw e;
    }
    log.debug(`installed the CNI plugin binary ${target}`, { source: spec.source });
  }
  return [spec.name];
}
