import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { HOOK_EVENTS, LAUNCHER_REL, applyConnect, claudeServerEntry, hookCommand, planConnect } from '../../src/mcp/connect';
import { CLI, buildCli, cli } from '../support/mcp';
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
    const r = cli(['connect', ...args, '--yes', '--workspace', ws.dir]);
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
    assert.deepEqual(mcp.mcpServers.waypoint, { type: 'stdio', command: 'node', args: [LAUNCHER_REL, 'mcp'], env: {} });
    assert.deepEqual(mcp.mcpServers.waypoint, claudeServerEntry());
    const shared = fs.readFileSync(mcpFile, 'utf8');
    assert.ok(!shared.includes(ws.dir) && !shared.includes(CLI) && !shared.includes(process.execPath), '.mcp.json is shared: no machine paths');
    assert.equal(fs.readFileSync(mcpFile, 'utf8'), JSON.stringify(mcp, null, 2) + '\n', 'JSON with 2-space indent');
    assert.equal(fs.readFileSync(path.join(ws.dir, '.waypoint', '.gitignore'), 'utf8'), '*\n', 'the launcher is in the git-ignored store directory');

    const settings = read(settingsFile);
    assert.deepEqual(settings.permissions, { allow: ['Bash(npm test)'] });
    const cmd = hookCommand({ cli: CLI, workspace: ws.dir });
    assert.ok(!cmd.includes(CLI) && !cmd.includes(process.execPath), 'the hook runs the launcher with node from PATH');
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

    // The written server command really starts Waypoint (from the project folder, as Claude Code runs it).
    const entry = read(mcpFile).mcpServers.waypoint;
    const run = spawnSync(entry.command, [entry.args[0], 'tasks', '--json'], { cwd: ws.dir, encoding: 'utf8', timeout: 30_000 });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), []);
  });

  it('in a git repository adds .claude/settings.local.json to .gitignore once, and never .mcp.json', () => {
    fs.mkdirSync(path.join(ws.dir, '.git'));
    fs.writeFileSync(path.join(ws.dir, '.gitignore'), 'node_modules');
    assert.equal(connect('claude-code').status, 0);
    const gi = fs.readFileSync(path.join(ws.dir, '.gitignore'), 'utf8');
    assert.match(gi, /^node_modules\n#.*\n\.claude\/settings\.local\.json\n$/);
    assert.ok(!gi.includes('.mcp.json'));
    assert.match(connect('claude-code').stdout, /already connected/);
    assert.equal(fs.readFileSync(path.join(ws.dir, '.gitignore'), 'utf8'), gi, 'not added twice');
  });

  it('a config written by version A still works when the extension folder becomes version B', () => {
    const exts = tmpDir('wp-exts-');
    const home = tmpDir('wp-home-');
    try {
      const fakeCli = (version: string, dir: string) => {
        fs.mkdirSync(path.join(dir, 'dist'), { recursive: true });
        fs.writeFileSync(path.join(dir, 'dist', 'cli.js'), `process.stdout.write(${JSON.stringify(version)} + ' ' + process.argv.slice(2).join(' '));\n`);
      };
      const a = path.join(exts.dir, 'waypoint-dev.waypoint-0.1.0');
      fakeCli('A', a);
      const plan = planConnect('claude-code', { cli: path.join(a, 'dist', 'cli.js'), workspace: ws.dir });
      const written = applyConnect(plan);
      assert.ok(written.includes(path.join(ws.dir, ...LAUNCHER_REL.split('/'))));
      const env = { ...process.env, HOME: home.dir, USERPROFILE: home.dir, VSCODE_EXTENSIONS: '' };
      const runLauncher = () => spawnSync('node', [LAUNCHER_REL, 'hook', 'claude-code'], { cwd: ws.dir, env, encoding: 'utf8' });
      assert.equal(runLauncher().stdout, 'A hook claude-code');
      // The update: 0.1.0's folder is gone, 0.2.0 is installed beside it.
      const b = path.join(exts.dir, 'waypoint-dev.waypoint-0.2.0-linux-x64');
      fs.renameSync(a, b);
      fakeCli('B', b);
      let r = runLauncher();
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, 'B hook claude-code');
      // Several installed (an old one left behind): the newest wins, by version not by name.
      fakeCli('old', path.join(exts.dir, 'waypoint-dev.waypoint-0.10.0'));
      assert.equal(runLauncher().stdout, 'old hook claude-code', '0.10.0 > 0.2.0');
      // Installed in the user's extensions directory instead (another editor): found there too.
      fs.rmSync(exts.dir, { recursive: true, force: true });
      fakeCli('C', path.join(home.dir, '.vscode', 'extensions', 'waypoint-dev.waypoint-1.0.0'));
      assert.equal(runLauncher().stdout, 'C hook claude-code');
      // Nothing installed: a hook still exits 0 (it must never fail the agent) and says so in a line;
      // anything else (the MCP server) is a clear error, not a stack trace.
      fs.rmSync(path.join(home.dir, '.vscode'), { recursive: true, force: true });
      r = runLauncher();
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /^Waypoint: no installed Waypoint found; this hook recorded nothing\.\n$/);
      r = spawnSync('node', [LAUNCHER_REL, 'mcp'], { cwd: ws.dir, env, encoding: 'utf8' });
      assert.equal(r.status, 127);
      assert.match(r.stderr, /no installed Waypoint found.*Connect an Agent/);
      // Connecting again (same version A path) changes nothing in the shared file.
      const again = planConnect('claude-code', { cli: path.join(a, 'dist', 'cli.js'), workspace: ws.dir });
      assert.ok(again.files.every((f) => !f.changed), 'idempotent');
    } finally {
      exts.cleanup();
      home.cleanup();
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
    assert.ok(!fs.existsSync(path.join(ws.dir, '.waypoint')), '--print writes nothing, the launcher included');
    assert.equal(connect('cursor').status, 0);
    assert.deepEqual(read(path.join(ws.dir, '.cursor', 'mcp.json')).mcpServers.waypoint, { command: 'node', args: ['${workspaceFolder}/' + LAUNCHER_REL, 'mcp', '--workspace', '${workspaceFolder}'], env: {} });

    const c = connect('codex');
    assert.equal(c.status, 0, c.stderr);
    assert.match(c.stdout, /\[mcp_servers\.waypoint\]/);
    // ~/.codex/config.toml serves every project: the entry names no workspace, it finds the one Codex starts it in.
    assert.ok(c.stdout.includes('command = "sh"'));
    assert.ok(!c.stdout.includes(ws.dir), 'no workspace hard-coded in the per-user config');
    assert.ok(c.stdout.includes(`exec node \\"$d/${LAUNCHER_REL}\\" mcp --workspace \\"$d\\"`), c.stdout);
    assert.deepEqual(fs.readdirSync(ws.dir).sort(), ['.codex', '.cursor', '.waypoint'], 'codex wrote the launcher it runs and the project hooks file, nothing outside the workspace');
  });
  /** Every file and folder under `dir`, as relative paths (what a write outside would change). */
  const listing = (dir: string): string[] => (fs.readdirSync(dir, { recursive: true }) as string[]).map(String).sort();

  it('refuses a symlinked agent folder (or file) for every agent: nothing written through it, nothing written at all', () => {
    const cases: [string[], string][] = [
      [['cursor'], '.cursor'],
      [['claude-code'], '.claude'],
      [['codex'], '.codex'],
      [['gemini-cli'], '.gemini'],
      [['vscode'], '.github'],
      [['cline'], '.clinerules'],
      [['qwen-code'], '.qwen'],
      [['opencode'], '.opencode'],
    ];
    for (const [args, folder] of cases) {
      const home = tmpDir('wp-connect-home-');
      try {
        fs.writeFileSync(path.join(home.dir, 'mcp.json'), '{"mcpServers":{}}');
        fs.writeFileSync(path.join(home.dir, 'settings.json'), '{}');
        const before = listing(home.dir);
        fs.symlinkSync(home.dir, path.join(ws.dir, folder));
        const r = connect(...args);
        assert.equal(r.status, 1, `${folder}: ${r.stdout}${r.stderr}`);
        assert.match(r.stderr, /is a symbolic link .*never through a link/, folder);
        assert.deepEqual(listing(home.dir), before, `${folder}: nothing written outside`);
        assert.equal(fs.readFileSync(path.join(home.dir, 'mcp.json'), 'utf8'), '{"mcpServers":{}}');
        assert.ok(!fs.existsSync(path.join(ws.dir, '.waypoint')), `${folder}: nothing written at all (not even the launcher)`);
        fs.unlinkSync(path.join(ws.dir, folder));
      } finally {
        home.cleanup();
      }
    }
    // A symlinked file: .mcp.json -> the user's global one.
    const home = tmpDir('wp-connect-home-');
    try {
      fs.writeFileSync(path.join(home.dir, 'global.json'), '{}');
      fs.symlinkSync(path.join(home.dir, 'global.json'), path.join(ws.dir, '.mcp.json'));
      const r = connect('claude-code');
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, /\.mcp\.json is a symbolic link/);
      assert.equal(fs.readFileSync(path.join(home.dir, 'global.json'), 'utf8'), '{}');
    } finally {
      home.cleanup();
    }
  });

  it('a folder swapped for a link after the plan was made is not written through (no-follow directories)', () => {
    const home = tmpDir('wp-connect-home-');
    try {
      const plan = planConnect('cursor', { cli: CLI, workspace: ws.dir });
      fs.mkdirSync(path.join(ws.dir, '.cursor'));
      fs.rmdirSync(path.join(ws.dir, '.cursor'));
      fs.symlinkSync(home.dir, path.join(ws.dir, '.cursor'));
      assert.throws(() => applyConnect(plan), (e: Error & { code?: string }) => e.code === 'unsafe_path' || e.code === 'io');
      assert.deepEqual(listing(home.dir), []);
    } finally {
      home.cleanup();
    }
  });

  it('without --yes shows the diff and writes nothing: no terminal means exit 2 with a hint', () => {
    fs.writeFileSync(path.join(ws.dir, '.mcp.json'), JSON.stringify({ mcpServers: { other: { command: 'x' } } }, null, 2) + '\n');
    const r = cli(['connect', 'claude-code', '--workspace', ws.dir]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stdout, /^--- a\/\.mcp\.json$/m);
    assert.match(r.stdout, /^\+\s+"waypoint": \{$/m);
    assert.match(r.stdout, /^# \.claude\/settings\.local\.json \(new file; machine-local/m);
    assert.match(r.stderr, /Nothing written.*--yes/);
    assert.deepEqual(listing(ws.dir), ['.mcp.json'], 'nothing written');
    const j = cli(['connect', 'cursor', '--workspace', ws.dir, '--json']);
    assert.equal(j.status, 2);
    assert.equal((JSON.parse(j.stdout) as { error: { code: string } }).error.code, 'usage');
    assert.deepEqual(listing(ws.dir), ['.mcp.json']);
  });
});
