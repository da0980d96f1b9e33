import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CLI, buildCli } from '../support/mcp';

/**
 * A full disk, for real: a small tmpfs (root only; skipped otherwise), the shipped CLI
 * run against a workspace on it.
 */
function cli(ws: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args, '--workspace', ws], { encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Fills the file system holding `dir` (whole 64 KiB chunks, then single bytes) and returns the filler's path. */
function fill(dir: string): string {
  const filler = path.join(dir, 'filler.bin');
  const fd = fs.openSync(filler, 'a');
  try {
    for (const size of [65536, 4096, 1]) {
      const chunk = Buffer.alloc(size, 1);
      for (;;) {
        try {
          fs.writeSync(fd, chunk);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw e;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}

function tempsIn(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.name === '.waypoint') continue;
      if (e.name.includes('waypoint-tmp') || e.name.includes('wp-tmp')) out.push(path.join(d, e.name));
      if (e.isDirectory()) walk(path.join(d, e.name));
    }
  };
  walk(dir);
  return out;
}

describe('engine: a full disk (tmpfs)', function () {
  this.timeout(120_000);
  let mnt = '';
  before(function () {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) this.skip();
    mnt = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-full-'));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=6m', 'tmpfs', mnt], { stdio: 'pipe' });
    } catch {
      fs.rmdirSync(mnt);
      mnt = '';
      this.skip();
    }
    buildCli();
  });
  after(() => {
    if (!mnt) return;
    execFileSync('umount', [mnt]);
    fs.rmdirSync(mnt);
  });

  it('read-only commands work on a full disk; a write says what needed space where; a rollback stopped by it stays undoable and leaves no temp', () => {
    const ws = path.join(mnt, 'ws');
    fs.mkdirSync(ws);
    // Incompressible content, so that writing it back needs the space it takes.
    const big = Object.fromEntries(['a.bin', 'b.bin', 'c.bin'].map((n) => [n, randomBytes(400 * 1024)]));
    for (const [n, b] of Object.entries(big)) fs.writeFileSync(path.join(ws, n), b);
    fs.writeFileSync(path.join(ws, 'notes.txt'), 'notes\n');
    const start = cli(ws, ['task', 'start', '--goal', 'g', '--json']);
    assert.equal(start.status, 0, start.stderr);
    const { taskId, baseCheckpointId } = JSON.parse(start.stdout) as { taskId: string; baseCheckpointId: string };
    for (const n of Object.keys(big)) fs.writeFileSync(path.join(ws, n), `small ${n}\n`);
    assert.equal(cli(ws, ['checkpoint', '--task', taskId]).status, 0);

    const filler = fill(mnt);
    for (const args of [['tasks'], ['show', '--task', taskId], ['resume-context', '--task', taskId], ['events', '--task', taskId]]) {
      const r = cli(ws, [...args, '--json']);
      assert.equal(r.status, 0, `${args[0]} on a full disk: ${r.stderr}`);
      JSON.parse(r.stdout);
      assert.match(r.stderr, /full .*read-only/, `${args[0]} says it opened read-only`);
    }
    const cp = cli(ws, ['checkpoint', '--task', taskId]);
    assert.equal(cp.status, 1);
    assert.match(cp.stderr, /disk holding .*\.waypoint is full/);
    assert.doesNotMatch(cp.stderr, /^waypoint: ENOSPC/m, 'not a bare ENOSPC');

    // Room for the pre-rollback checkpoint and the plan, not for the files it writes back.
    fs.truncateSync(filler, fs.statSync(filler).size - 256 * 1024);
    const before = Object.fromEntries(['a.bin', 'b.bin', 'c.bin', 'notes.txt'].map((n) => [n, fs.readFileSync(path.join(ws, n), 'utf8')]));
    const rb = cli(ws, ['rollback', '--task', taskId, '--to', baseCheckpointId, '--yes']);
    assert.equal(rb.status, 1, rb.stdout);
    assert.match(rb.stderr, /No space left for the rollback/);
    assert.match(rb.stderr, /--undo/);
    assert.deepEqual(tempsIn(ws), [], 'no temp file left in the workspace');

    fs.rmSync(filler);
    const undo = cli(ws, ['rollback', '--task', taskId, '--undo', '--yes']);
    assert.equal(undo.status, 0, undo.stderr);
    for (const [n, text] of Object.entries(before)) assert.equal(fs.readFileSync(path.join(ws, n), 'utf8'), text, n);
    assert.deepEqual(tempsIn(ws), []);
  });
});
