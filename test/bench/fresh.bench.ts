/**
 * A checkpoint from a fresh process, with no owner running (issue 17, item 10): what
 * `waypoint checkpoint` costs when an agent's hook or a person's terminal starts the
 * CLI cold on a large tree, side by side with `git add -A && git commit` (two fresh
 * git processes) on a copy of the same tree, with the same 10 files changed in each
 * round. Both sides run as child processes under `/usr/bin/time`, which reports each
 * one's peak RSS. Target: ≤ 0.5× git, at ≤ 150 MB peak RSS.
 *
 *   npm run bench -- --only=fresh
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { benchDir, fmtMs, median, printTable, type Row } from './util';

const ROOT = path.resolve(__dirname, '..', '..');
const CLI = path.join(ROOT, 'dist', 'cli.js');
/** The tree: FILES files in directories of PER_DIR, two levels deep, like a monorepo's sources. */
const FILES = 51_000;
export const PER_DIR = 17;
const CHANGED = 10;

export interface Timed {
  ms: number;
  rssMb: number;
  out: string;
}

/** Runs a command under /usr/bin/time: its wall time and peak RSS (of the process, the larger of parent and children for git's two). */
export function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Timed {
  const t0 = performance.now();
  const r = spawnSync('/usr/bin/time', ['-f', 'MAXRSS_KB %M', cmd, ...args], { cwd, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', ...env } });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.slice(-2000)}`);
  const kb = Number(/MAXRSS_KB (\d+)/.exec(r.stderr)?.[1] ?? NaN);
  return { ms, rssMb: kb / 1024, out: r.stdout };
}

export const GIT = ['-c', 'user.name=bench', '-c', 'user.email=bench@example.invalid', '-c', 'core.hooksPath=/dev/null', '-c', 'gc.auto=0', '-c', 'commit.gpgSign=false'];

export function content(i: number, round: number): string {
  // ~1.5 KB of source-like text, distinct per file (no free dedup for either side).
  const lines = [`// module ${i}${round ? ` edit ${round}` : ''}`];
  for (let k = 0; k < 40; k++) lines.push(`export const v${k}_${i} = ${(i * 31 + k) % 997}; // ${createHash('sha1').update(`${i}:${k}`).digest('hex').slice(0, 8)}`);
  return lines.join('\n') + '\n';
}

export function relOf(i: number): string {
  const d = Math.floor(i / PER_DIR);
  return `pkg${Math.floor(d / 60)}/dir${d % 60}/m${i}.ts`;
}

export async function main(o: { quick?: boolean } = {}): Promise<Row[]> {
  spawnSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'ignore' });
  const files = o.quick ? 8_000 : FILES;
  const rounds = o.quick ? 3 : 7;
  const { dir, cleanup } = benchDir('wp-bench-fresh-');
  const log = (s: string) => process.stderr.write(`[fresh] ${s}\n`);
  try {
    const ws = path.join(dir, 'ws');
    const gws = path.join(dir, 'git-ws');
    for (const tree of [ws, gws]) {
      for (let i = 0; i < files; i++) {
        const f = path.join(tree, relOf(i));
        if (i % PER_DIR === 0) fs.mkdirSync(path.dirname(f), { recursive: true });
        fs.writeFileSync(f, content(i, 0));
      }
    }
    // Old mtimes: the tree was there before the task, as in real use (and neither side's first scan is racy).
    const old = new Date(Date.now() - 3600_000);
    for (const tree of [ws, gws]) for (let i = 0; i < files; i++) fs.utimesSync(path.join(tree, relOf(i)), old, old);
    log(`trees: ${files} files each`);
    // Untimed set-up: git's first commit; Waypoint's task with its base checkpoint.
    run('git', ['init', '-q'], gws);
    run('git', [...GIT, 'add', '-A'], gws);
    run('git', [...GIT, 'commit', '-q', '-m', 'base'], gws);
    const started = run(process.execPath, [CLI, 'task', 'start', '--workspace', ws, '--goal', 'fresh-process bench', '--lease-ttl', '86400', '--json'], ws);
    const taskId = (JSON.parse(started.out) as { taskId: string }).taskId;
    log(`base checkpoint (first scan, untimed): ${fmtMs(started.ms)}, ${started.rssMb.toFixed(0)} MB`);
    // One checkpoint more, untimed: the first rescan after the base writes what later rescans reuse.
    run(process.execPath, [CLI, 'checkpoint', '--workspace', ws, '--task', taskId, '--json'], ws);
    const wp: Timed[] = [];
    const git: { ms: number; rssMb: number }[] = [];
    for (let r = 1; r <= rounds; r++) {
      const picked = Array.from({ length: CHANGED }, (_, k) => (r * 7919 + k * 4801) % files);
      for (const tree of [ws, gws]) for (const i of picked) fs.writeFileSync(path.join(tree, relOf(i)), content(i, r));
      const add = run('git', [...GIT, 'add', '-A'], gws);
      const commit = run('git', [...GIT, 'commit', '-q', '-m', `round ${r}`], gws);
      git.push({ ms: add.ms + commit.ms, rssMb: Math.max(add.rssMb, commit.rssMb) });
      const cp = run(process.execPath, [CLI, 'checkpoint', '--workspace', ws, '--task', taskId, '--label', `round ${r}`, '--json'], ws);
      const changed = (JSON.parse(cp.out) as { filesChanged: number }).filesChanged;
      if (changed !== CHANGED) throw new Error(`round ${r}: the checkpoint saw ${changed} files changed, not ${CHANGED}`);
      wp.push(cp);
      log(`round ${r}: waypoint ${fmtMs(cp.ms)} (${cp.rssMb.toFixed(0)} MB), git ${fmtMs(add.ms + commit.ms)} (${Math.max(add.rssMb, commit.rssMb).toFixed(0)} MB)`);
    }
    const w = median(wp.map((x) => x.ms));
    const g = median(git.map((x) => x.ms));
    const rss = Math.max(...wp.map((x) => x.rssMb));
    const rows: Row[] = [
      { measure: `checkpoint from a fresh process, ${files.toLocaleString('en')} files, ${CHANGED} changed (median of ${rounds})`, waypoint: fmtMs(w), baseline: `${fmtMs(g)} git add -A && git commit`, ratio: `${(w / g).toFixed(2)}×`, target: '≤ 0.5×', ok: w / g <= 0.5 },
      { measure: 'peak RSS of that checkpoint process (max of the rounds)', waypoint: `${rss.toFixed(0)} MB`, baseline: `${Math.max(...git.map((x) => x.rssMb)).toFixed(0)} MB git`, ratio: '-', target: '≤ 150 MB', ok: rss <= 150 },
    ];
    printTable('Checkpoint from a fresh process (no owner running)', rows);
    return rows;
  } finally {
    cleanup();
  }
}

if (require.main === module) void main({ quick: process.argv.includes('--quick') });
