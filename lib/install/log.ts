// What the installer logs through: the agent's Logger (scope `cni-agent`, as upstream's
// installer) fits; tests pass a recorder. Nothing is logged when none is given.
import type { LogFields } from '../util/log.js';

export interface InstallLog {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export const SILENT_LOG: InstallLog = { debug() {}, info() {}, warn() {}, error() {} };
