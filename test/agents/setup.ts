import { pins, ensureInstalled, type AgentName } from './install';
import { buildCli } from '../support/mcp';

// Root hooks: the CLI built once, each pinned agent installed once (skipped when the cache has it).
export const mochaHooks = {
  beforeAll(this: Mocha.Context) {
    this.timeout(600_000);
    buildCli();
    for (const agent of Object.keys(pins()) as AgentName[]) ensureInstalled(agent);
  },
};
