import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describeStop, driverName, localTime, relativeTime } from '../../src/extension/resume/words';
import { findOnPath, installedAgentClis } from '../../src/extension/resume/agentClis';

const NOW = Date.UTC(2026, 11, 1, 6, 17, 54);
const task = (reason: string, over: { agent?: string | null; state?: 'interrupted' | 'failed' | 'suspended'; at?: number } = {}) => ({
  agent: over.agent === undefined ? 'demo-agent' : over.agent,
  lease: null,
  state: over.state ?? ('interrupted' as const),
  interruption: { reason, class: 'recoverable' as const, at: over.at ?? NOW - 3 * 60_000, stepId: null },
});

describe('resume words: a task’s state in the person’s words', () => {
  it('says relative time the way people do', () => {
    assert.equal(relativeTime(NOW - 3_000, NOW), 'just now');
    assert.equal(relativeTime(NOW + 60_000, NOW), 'just now');
    assert.equal(relativeTime(NOW - 45_000, NOW), '45 s ago');
    assert.equal(relativeTime(NOW - 3 * 60_000, NOW), '3 min ago');
    assert.equal(relativeTime(NOW - 2 * 3_600_000, NOW), '2 h ago');
    assert.equal(relativeTime(NOW - 26 * 3_600_000, NOW), 'yesterday');
    assert.equal(relativeTime(NOW - 4 * 86_400_000, NOW), '4 days ago');
  });

  it('gives local time: the clock today, the day too otherwise', () => {
    const today = localTime(NOW - 60_000, NOW, 'en-GB');
    assert.match(today, /^\d\d:\d\d$/);
    assert.equal(today, new Date(NOW - 60_000).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' }));
    assert.match(localTime(NOW - 3 * 86_400_000, NOW, 'en-GB'), /^[A-Z][a-z]{2} \d{1,2} [A-Z][a-z]{2}, \d\d:\d\d$/);
  });

  it('turns an expired lease into “<agent> stopped reporting 3 min ago”, with no UTC stamp or lease owner id', () => {
    const s = describeStop(task('lease of cli expired at 2026-12-01T06:14:54.227Z (no call for 5 s)'), NOW, 'en-GB');
    assert.ok(s?.startsWith('demo-agent stopped reporting 3 min ago ('), s);
    assert.doesNotMatch(s!, /2026-12-01T|lease|cli/);
  });

  it('names the lease owner when the task has no agent name', () => {
    const s = describeStop(task('lease of cli expired at 2026-12-01T06:14:54.227Z (no call for 5 s)', { agent: null }), NOW);
    assert.match(s!, /^cli stopped reporting 3 min ago/);
  });

  it('says an exited process, a takeover and an agent’s own reason plainly', () => {
    assert.match(describeStop(task('owner process 4242 (window-1) exited'), NOW)!, /^demo-agent went away 3 min ago \(.+\) \(its process ended\)$/);
    assert.match(describeStop(task('taken over by window-2'), NOW)!, /^Taken over by window-2 3 min ago/);
    assert.match(describeStop(task('needs a token', { state: 'failed' }), NOW)!, /^demo-agent failed 3 min ago \(.+\): needs a token$/);
    assert.match(describeStop(task('lunch', { state: 'suspended', agent: 'manual' }), NOW)!, /^The agent paused 3 min ago \(.+\): lunch$/);
  });

  it('says nothing for a task that has not stopped', () => {
    assert.equal(describeStop({ agent: 'a', lease: null, state: 'running', interruption: null }, NOW), undefined);
  });

  it('names the driver: the agent, else the lease owner', () => {
    assert.equal(driverName({ agent: 'claude-code', lease: null }), 'claude-code');
    assert.equal(driverName({ agent: null, lease: { owner: 'cli', pid: null, host: null, ttlMs: 1, heartbeatAt: 0, expiresAt: 0 } as never }), 'cli');
    assert.equal(driverName({ agent: null, lease: null }), 'The agent');
  });
});

describe('agent CLIs on PATH', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-clis-'));
    fs.writeFileSync(path.join(dir, 'codex'), '#!/bin/sh\n', { mode: 0o755 });
    fs.writeFileSync(path.join(dir, 'claude'), '#!/bin/sh\n', { mode: 0o755 });
    fs.writeFileSync(path.join(dir, 'gemini'), 'not executable\n', { mode: 0o644 });
    fs.mkdirSync(path.join(dir, 'copilot'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('finds executables only, never running them', () => {
    assert.equal(findOnPath('codex', `/nonexistent:${dir}`, 'linux'), path.join(dir, 'codex'));
    assert.equal(findOnPath('gemini', dir, 'linux'), undefined, 'not executable');
    assert.equal(findOnPath('copilot', dir, 'linux'), undefined, 'a directory');
    assert.equal(findOnPath('codex', '', 'linux'), undefined);
  });

  it('lists what is installed, the task’s own agent first, each with its interactive arguments', () => {
    const found = installedAgentClis('codex', dir, 'linux');
    assert.deepEqual(
      found.map((f) => f.cli.bin),
      ['codex', 'claude'],
    );
    assert.deepEqual(found[0].cli.args('Resume: go'), ['Resume: go']);
    assert.deepEqual(installedAgentClis(null, dir, 'linux').map((f) => f.cli.bin), ['claude', 'codex']);
  });
});
