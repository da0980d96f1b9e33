import * as assert from 'node:assert/strict';
import { terminalAgent } from '../../src/extension/terminalOwners';

/** Which terminal commands are an agent's (its changes revert with agent-only rollback) and which are the person's. */
describe('terminal owners', () => {
  const map = { Copilot: 'copilot', 'Claude Code': 'claude-code' };
  it('names the agent by the terminal name prefix, case and spaces aside', () => {
    assert.equal(terminalAgent('Copilot', map, null), 'copilot');
    assert.equal(terminalAgent('copilot (2)', map, null), 'copilot');
    assert.equal(terminalAgent('  Claude Code — build', map, null), 'claude-code');
  });
  it("a terminal named like the running task's agent is that agent's", () => {
    assert.equal(terminalAgent('aider: tests', map, 'aider'), 'aider');
  });
  it("any other terminal is the person's", () => {
    assert.equal(terminalAgent('bash', map, 'aider'), undefined);
    assert.equal(terminalAgent('zsh', {}, null), undefined);
  });
});
