// The agent's configuration is read by the node's settings table, which lives below the agent
// (lib/settings/node.ts) so that the installer and the repair controller can read the same
// settings without importing lib/agent. Re-exported here for the agent's own modules and users.
export * from '../settings/node.js';
