import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HOOK_EVENTS, hookCommand } from '../../src/mcp/connect';
import { CLI, buildCli, cli, sc, stdioSession } from '../support/mcp';
import { tmpDir } from '../support/tmp';

type Json = Record<string, any>;
const read = (f: string) => JSON.parse(fs.readFileSync(f, 'utf8')) as Json;

describe('waypoint connect', function () {
  this.timeout(60_000);
  let ws: ReturnType<typeof tmpDir>;
  before(() => buildCli());
  beforeEach(() => {
    ws = tmpDir('wp-mcp-connect-');
  });
  afterEach(() => ws.cleanup());

  const connect = (...args: string[]) => {
    const r = cli(['connect', ...args, '--workspace', ws.dir]);
    return r;
  };

  it('claude-code merges the server into .mcp.json and hooks into settings.local.json, keeping others; twice is a no-op', async () => {
    const mcpFile = path.join(ws.dir, '.mcp.json');
    const settingsFile = path.join(ws.dir, '.claude', 'settings.local.json');
    fs.mkdirSync(path.dirname(settingsFile));
    fs.writeFileSync(mcpFile, JSON.stringify({ mcpServers: { other: { command: 'other-server', args: ['--x'] } }, extra: true }));
    const theirHook = { matcher: 'Bash', hooks: [{ type: 'command', command: 'echo audit >> log' }] };
    fs.writeFileSync(settingsFile, JSON.stringify({ permissions: { allow: ['Bash(npm test)'] }, hooks: { PreToolUse: [theirHook] } }));

    const r1 = connect('claude-code');
    assert.equal(r1.status, 0, r1.stderr);
    const mcp = read(mcpFile);
    assert.deepEqual(mcp.mcpServers.other, { command: 'other-server', args: ['--x'] });
    assert.equal(mcp.extra, true);
    assert.deepEqual(mcp.mcpServers.waypoint, { type: 'stdio', command: process.execPath, args: [CLI, 'mcp', '--workspace', ws.dir], env: {} });
    assert.equal(fs.readFileSync(mcpFile, 'utf8'), JSON.stringify(mcp, null, 2) + '\n', 'JSON with 2-space indent');

    const settings = read(settingsFile);
    assert.deepEqual(settings.permissions, { allow: ['Bash(npm test)'] });
    const cmd = hookCommand({ node: process.execPath, cli: CLI, workspace: ws.dir });
    for (const event of HOOK_EVENTS) {
      const ours = (settings.hooks[event] as Json[]).filter((g) => g.hooks.some((h: Json) => h.command === cmd));
      assert.equal(ours.length, 1, event);
    }
    assert.deepEqual(settings.hooks.PreToolUse[0], theirHook, 'their hook kept, first');
    assert.match(settings.hooks.PreToolUse[1].matcher, /Edit/);

    const before = [fs.readFileSync(mcpFile, 'utf8'), fs.readFileSync(settingsFile, 'utf8')];
    const r2 = connect('claude-code');
    assert.equal(r2.status, 0, r2.stderr);
    assert.match(r2.stdout, /already connected/);
    assert.deepEqual([fs.readFileSync(mcpFile, 'utf8'), fs.readFileSync(settingsFile, 'utf8')], before);

    // The written server command really starts Waypoint's MCP server.
    const entry = read(mcpFile).mcpServers.waypoint;
    assert.equal(entry.command, process.execPath);
    const s = await stdioSession(ws.dir);
    try {
      sc(await s.client.callTool({ name: 'waypoint_task_status', arguments: {} }));
    } finally {
      await s.close();
    }
  });

  it('refuses malformed JSON and leaves the file untouched', () => {
    const mcpFile = path.join(ws.dir, '.mcp.json');
    fs.writeFileSync(mcpFile, '{ "mcpServers": { oops ');
    const r = connect('claude-code');
    assert.equal(r.status, 1);
    assert.match(r.stderr, /\.mcp\.json is not valid JSON.*left it untouched/);
    assert.equal(fs.readFileSync(mcpFile, 'utf8'), '{ "mcpServers": { oops ');
    assert.ok(!fs.existsSync(path.join(ws.dir, '.claude')), 'nothing else was written either');
    fs.writeFileSync(mcpFile, '{"mcpServers": []}');
    assert.match(connect('claude-code').stderr, /"mcpServers" is not an object/);
  });

  it('cursor writes .cursor/mcp.json; --print writes nothing; codex prints the config.toml snippet', () => {
    const p = connect('cursor', '--print');
    assert.equal(p.status, 0, p.stderr);
    assert.match(p.stdout, /"waypoint"/);
    assert.ok(!fs.existsSync(path.join(ws.dir, '.cursor')));
    assert.equal(connect('cursor').status, 0);
    assert.deepEqual(read(path.join(ws.dir, '.cursor', 'mcp.json')).mcpServers.waypoint.args, [CLI, 'mcp', '--workspace', ws.dir]);

    const c = connect('codex');
    assert.equal(c.status, 0, c.stderr);
    assert.match(c.stdout, /\[mcp_servers\.waypoint\]/);
    assert.ok(c.stdout.includes(`command = ${JSON.stringify(process.execPath)}`));
    assert.ok(c.stdout.includes(`args = [${JSON.stringify(CLI)}, "mcp", "--workspace", ${JSON.stringify(ws.dir)}]`));
    assert.deepEqual(fs.readdirSync(ws.dir).sort(), ['.cursor'], 'codex wrote nothing');
  });
});
