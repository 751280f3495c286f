// `podwire install <render|entry>`: what the CNI installer (lib/install) would write, without
// writing anything. `render` merges the plugin entry into an existing CNI config exactly as the
// installer does (byte-identical to Istio's installer for the same input); `entry` prints the
// plugin entry itself. The entry comes from the installer's settings (flags, env, defaults,
// as `podwire agent` reads them) or, for render, from a file given with --entry.
import { basename } from 'node:path';
import { ConfigError } from '../settings/framework.js';
import { describeInstallSettings, parseInstallConfig, type InstallConfig } from '../install/config.js';
import { insertEntry, parseJsonObject } from '../install/conflist.js';
import { PLUGIN_NAME, renderPluginEntry } from '../install/plugin-entry.js';
import { UsageError } from './args.js';
import type { Command } from './main.js';
import { readInput } from './read-input.js';

function usage(): string {
  const rows = describeInstallSettings().map((s) => {
    const names = s.env ? `${s.env} / ${s.flag}` : s.flag;
    const def = s.default === '' ? '(empty)' : s.default;
    return `  ${names}\n      ${s.description}\n      default: ${def}`;
  });
  return [
    'Usage: podwire install <render|entry> [options] [--flag=value]...',
    '',
    '  render --existing FILE [--entry FILE] [--owned] [--flag=value]...',
    '      prints the CNI config the installer would write for the existing config FILE (- for',
    '      stdin): FILE with the plugin entry appended (an earlier one replaced), keys sorted; a',
    '      single-plugin .conf becomes a list (written as <name>.conflist). --entry FILE: use that',
    '      plugin entry instead of one made from the settings. --owned: the Istio-owned file',
    '      (ISTIO_OWNED_CNI_CONFIG_FILENAME), same merge, FILE left alone. Where it would go is',
    '      said on stderr.',
    '  entry [--flag=value]...',
    '      prints the plugin entry (what a standalone install, CHAINED_CNI_PLUGIN=false, writes)',
    '',
    'Nothing is written. Settings are read from their flag, else the environment variable, else',
    'the default, as `podwire agent` reads them (its other flags are accepted and ignored).',
    '',
    'Settings:',
    ...rows,
  ].join('\n');
}

function config(argv: string[]): InstallConfig {
  try {
    return parseInstallConfig(process.env, argv);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(err.message, { showUsage: false });
    throw err;
  }
}

/** Splits render's own options from the settings flags. */
function renderOptions(argv: string[]): { existing?: string; entry?: string; owned: boolean; settings: string[] } {
  const out: { existing?: string; entry?: string; owned: boolean; settings: string[] } = { owned: false, settings: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg : arg.slice(0, eq);
    if (name === '--owned') {
      if (eq >= 0) throw new UsageError('--owned takes no value');
      out.owned = true;
    } else if (name === '--existing' || name === '--entry') {
      const value = eq >= 0 ? arg.slice(eq + 1) : argv[++i];
      if (value === undefined || value === '') throw new UsageError(`${name} needs a file (- for stdin)`);
      if (out[name === '--existing' ? 'existing' : 'entry'] !== undefined) throw new UsageError(`${name} given twice`);
      out[name === '--existing' ? 'existing' : 'entry'] = value;
    } else {
      out.settings.push(arg);
    }
  }
  return out;
}

async function render(argv: string[]): Promise<number> {
  const o = renderOptions(argv);
  if (o.existing === undefined) throw new UsageError('render needs --existing FILE (the CNI config to merge into)');
  if (o.entry !== undefined && o.settings.length > 0) {
    throw new UsageError(`--entry gives the whole plugin entry; settings flags (${o.settings[0]}) do not apply to it`);
  }
  if (o.entry === '-' && o.existing === '-') throw new UsageError('--existing and --entry cannot both be stdin');
  const cfg = config(o.settings);
  if (o.entry === undefined && !cfg.chainedCniPlugin) {
    throw new UsageError('render merges into an existing config; with CHAINED_CNI_PLUGIN=false the installer writes the entry alone (podwire install entry)', { showUsage: false });
  }
  const entry = o.entry === undefined ? renderPluginEntry(cfg.entry) : await readInput(o.entry, { what: 'plugin entry' });
  const existing = await readInput(o.existing, { what: 'CNI config' });
  // The plugin type replaced in the list: the entry's own `type` when it is given whole.
  const type = o.entry === undefined ? cfg.cniPluginName : String(parseJsonObject(entry, `the plugin entry ${o.entry}`, 'ERR_ENTRY_INVALID').type ?? PLUGIN_NAME);
  const merged = insertEntry(entry, existing, type);
  const name = o.existing === '-' ? 'the existing config' : basename(o.existing);
  const convert = !o.owned && o.existing.endsWith('.conf');
  const target = o.owned
    ? `${cfg.istioOwnedCniConfigFilename} (mode ${cfg.cniConfGroupRead ? '0640' : '0600'}; ${name} is not modified)`
    : convert ? `${name}list (${name} renamed; its mode kept)` : `${name} (its mode kept)`;
  process.stderr.write(`would write ${target}\n`);
  process.stdout.write(merged);
  return 0;
}

export const command: Command = {
  summary: 'Print what the CNI installer would write: the merged conflist or the plugin entry.',
  get usage() {
    return usage();
  },
  async run(argv) {
    const [action, ...rest] = argv;
    if (action === 'render') return render(rest);
    if (action === 'entry') {
      process.stdout.write(renderPluginEntry(config(rest).entry));
      return 0;
    }
    throw new UsageError(action === undefined ? 'needs an action: render or entry' : `unknown action ${JSON.stringify(action)} (render or entry)`);
  },
};
