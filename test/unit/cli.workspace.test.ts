import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { buildCli, CLI } from '../support/mcp';
import { tmpDir } from '../support/tmp';

/**
 * Which workspace a command works on when run without --workspace: found as git finds its
 * repository (the nearest folder holding a store, else the repository's root), and a
 * command that only reads never creates a store where nothing was recorded. The shipped CLI.
 */

function run(args: string[], cwd: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const READ_ONLY: string[][] = [
  ['tasks'],
  ['show', '--task', 't_x'],
  ['events'],
  ['stats'],
  ['storage'],
  ['checkpoints', '--task', 't_x'],
  ['diff', '--from', 'c_x'],
  ['resume-context', '--task', 't_x'],
  ['verify'],
];

describe('cli: finding the workspace, and reading commands that create nothing', function () {
  this.timeout(120_000);
  before(() => buildCli());
  let root: ReturnType<typeof tmpDir>;
  beforeEach(() => (root = tmpDir('wp-cli-ws-')));
  afterEach(() => root.cleanup());

  it('in a subfolder of a repository, the repository’s store is found and none is created in the subfolder', () => {
    const repo = path.join(root.dir, 'repo');
    const sub = path.join(repo, 'packages', 'vite');
    fs.mkdirSync(sub, { recursive: true });
    fs.mkdirSync(path.join(repo, '.git'));
    const started = run(['task', 'start', '--goal', 'at the root', '--json'], repo);
    assert.equal(started.status, 0, started.stderr);
    const { taskId } = JSON.parse(started.stdout) as { taskId: string };
    const listed = run(['tasks', '--json'], sub);
    assert.equal(listed.status, 0, listed.stderr);
    assert.deepEqual((JSON.parse(listed.stdout) as { id: string }[]).map((t) => t.id), [taskId]);
    assert.equal(fs.existsSync(path.join(sub, '.waypoint')), false, 'no store in the subfolder');
    assert.equal(fs.existsSync(path.join(repo, 'packages', '.waypoint')), false);
  });

  it('in a subfolder of a repository with no store yet, a recording command creates it at the repository’s root', () => {
    const repo = path.join(root.dir, 'repo');
    const sub = path.join(repo, 'src', 'deep');
    fs.mkdirSync(sub, { recursive: true });
    fs.mkdirSync(path.join(repo, '.git'));
    const started = run(['task', 'start', '--goal', 'from deep', '--json'], sub);
    assert.equal(started.status, 0, started.stderr);
    assert.ok(fs.existsSync(path.join(repo, '.waypoint')), 'the store is at the repository root');
    assert.equal(fs.existsSync(path.join(sub, '.waypoint')), false);
  });

  it('a nearer store (a nested workspace) wins over the repository’s root', () => {
    const repo = path.join(root.dir, 'repo');
    const nested = path.join(repo, 'tools');
    fs.mkdirSync(path.join(nested, 'bin'), { recursive: true });
    fs.mkdirSync(path.join(repo, '.git'));
    assert.equal(run(['init'], repo).status, 0);
    assert.equal(run(['init', '--workspace', nested], root.dir).status, 0);
    const info = run(['init', '--json'], path.join(nested, 'bin'));
    assert.equal((JSON.parse(info.stdout) as { storeDir: string }).storeDir, path.join(nested, '.waypoint'));
  });

  it('every reading command in a folder with no store says so (exit 1) and creates nothing', () => {
    const scratch = path.join(root.dir, 'scratch');
    fs.mkdirSync(scratch);
    for (const args of READ_ONLY) {
      for (const json of [false, true]) {
        const r = run([...args, ...(json ? ['--json'] : [])], scratch);
        assert.equal(r.status, 1, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, /There is no Waypoint store in .*scratch.*nothing has been recorded here/, args.join(' '));
        if (json) assert.equal((JSON.parse(r.stdout) as { error: { code: string } }).error.code, 'not_found');
        assert.deepEqual(fs.readdirSync(scratch), [], `${args.join(' ')} created nothing`);
      }
    }
    // Named explicitly, the same.
    const r = run(['tasks', '--workspace', scratch], root.dir);
    assert.equal(r.status, 1);
    assert.deepEqual(fs.readdirSync(scratch), []);
  });
});
