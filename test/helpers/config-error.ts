// Runs a configuration read that must fail and returns its ConfigError
// (the agent's and the installer's tables throw the same class).
import { expect } from 'vitest';
import { ConfigError } from '../../lib/agent/config.js';

export function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    expect((e as ConfigError).code).toBe('ERR_AGENT_CONFIG');
    return e as ConfigError;
  }
  throw new Error('expected a ConfigError');
}
