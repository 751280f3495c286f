// The CNI installer (spec §3): the plugin binary, the optional plugin kubeconfig, the plugin
// entry in the node's CNI config, and the watch that keeps them in place.
export { Installer } from './installer.js';
export type { InstallerOptions, RevertLoopInfo } from './installer.js';
export { parseInstallConfig, describeInstallSettings, INSTALL_SETTINGS, DEFAULT_PLUGIN_BINARY, pluginLogLevel } from './config.js';
export type { InstallConfig } from './config.js';
export { InstallError, failureResult } from './errors.js';
export type { InstallErrorCode, InstallStage } from './errors.js';
export { renderPluginEntry, PLUGIN_NAME } from './plugin-entry.js';
export type { PluginEntrySettings } from './plugin-entry.js';
export { insertEntry, removeEntry } from './conflist.js';
export { listCandidates, libcniProblem } from './candidates.js';
export { checkCniConfig } from './validity.js';
export type { Validity, InvalidReason } from './validity.js';
export { copyBinaries } from './binaries.js';
export { renderKubeconfig, writeKubeconfig, KUBECONFIG_NAME } from './kubeconfig.js';
export { InstallThrottle } from './throttle.js';
export type { InstallLog } from './log.js';
