/**
 * The background owner (a first CLI or hook call in a workspace nobody owns starts one;
 * later calls are relayed to it, and its watcher tells each checkpoint what changed),
 * side by side with `git add -A && git commit` on a copy of the same tree, with the same
 * 10 files changed each time (the tree of fresh.bench.ts: ~51,000 files):
 *
 * - first call, no owner: the CLI finds nobody, opens the store and checkpoints itself,
 *   then starts the background owner, which takes the store, watches the tree and scans it
 *   once. Each round stops the owner first, so every sample is a real first call.
 * - later calls, once that owner is warm (how long after the first call is reported): the
 *   owner answers; its checkpoint looks only at what changed. Calls go through the
 *   `waypoint` command (dist/waypoint, which relays a checkpoint without starting Node);
 *   one more per round as `node dist/cli.js checkpoint` is reported beside them.
 * - a hook call to that owner against `node -e 0`.
 *
 * Peak RSS is the calling CLI process's (/usr/bin/time); the owner's own resident size is
 * what `waypoint status` reports. Targets (issue 38): first ≤ 1.5× git at ≤ 150 MB, later
 * ≤ 0.25× git, hook ≤ +100 ms over `node -e 0`.
 *
 *   npm run bench -- --only=background
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GIT, PER_DIR, content, relOf, run, type Timed } from './fresh.bench';
import { benchDir, fmtMs, median, printTable, type Row } from './util';

const ROOT = path.resolve(__dirname, '..', '..');
const CLI = path.join(ROOT, 'dist', 'cli.js');
/** The `waypoint` command on Linux and macOS: relays a checkpoint to a serving owner without starting Node. */
const LAUNCHER = path.join(ROOT, 'dist', 'waypoint');
const FILES = 51_000;
const CHANGED = 10;
/** The background owner's environment for this bench: on, and not leaving between rounds. */
const ON = { WAYPOINT_NO_DAEMON: '', WAYPOINT_DAEMON: '1', WAYPOINT_DAEMON_IDLE_SECONDS: '600' };

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

type Status = { owner: { pid: number; background: boolean } | null; status?: { rssBytes: number; watch: { kind: string; dirs?: number }; warmUp?: string; warmUpMs?: number } };

export function status(ws: string): Status {
  const r = spawnSync(process.execPath, [CLI, 'status', '--json', '--workspace', ws], { encoding: 'utf8', env: { ...process.env, WAYPOINT_NO_DAEMON: '1' } });
  if (r.status !== 0) throw new Error(`status exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Status;
}

/** The background owner the first call started, once it serves and its watcher's first scan is over. */
async function warmOwner(ws: string): Promise<Status & { status: NonNullable<Status['status']> }> {
  const until = Date.now() + 120_000;
  for (;;) {
    const s = status(ws);
    if (s.owner?.background && s.status && s.status.warmUp !== 'running') return s as Status & { status: NonNullable<Status['status']> };
    if (Date.now() > until) throw new Error(`no warm background owner: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function stopOwner(ws: string): Promise<void> {
  const s = status(ws);
  if (!s.owner) return;
  if (!s.owner.background) throw new Error(`the store is owned by pid ${s.owner.pid}, not a background owner`);
  process.kill(s.owner.pid, 'SIGTERM');
  for (const until = Date.now() + 30_000; alive(s.owner.pid) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
}

export async function main(o: { quick?: boolean } = {}): Promise<Row[]> {
  spawnSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'ignore' });
  const files = o.quick ? Number(process.env.WAYPOINT_BENCH_FILES) || 8_000 : FILES;
  const rounds = Number(process.env.WAYPOINT_BENCH_ROUNDS) || (o.quick ? 2 : 5);
  const later = 2;
  const { dir, cleanup } = benchDir('wp-bench-bg-');
  const log = (s: string) => process.stderr.write(`[background] ${s}\n`);
  const ws = path.join(dir, 'ws');
  const gws = path.join(dir, 'git-ws');
  try {
    for (const tree of [ws, gws]) {
      for (let i = 0; i < files; i++) {
        const f = path.join(tree, relOf(i));
        if (i % PER_DIR === 0) fs.mkdirSync(path.dirname(f), { recursive: true });
        fs.writeFileSync(f, content(i, 0));
      }
    }
    const old = new Date(Date.now() - 3600_000);
    for (const tree of [ws, gws]) for (let i = 0; i < files; i++) fs.utimesSync(path.join(tree, relOf(i)), old, old);
    log(`trees: ${files} files each`);
    run('git', ['init', '-q'], gws);
    run('git', [...GIT, 'add', '-A'], gws);
    run('git', [...GIT, 'commit', '-q', '-m', 'base'], gws);
    // Untimed, with no background owner: the task and its base, and the first rescan.
    const off = { WAYPOINT_NO_DAEMON: '1' };
    const started = run(process.execPath, [CLI, 'task', 'start', '--workspace', ws, '--goal', 'background-owner bench', '--lease-ttl', '86400', '--json'], ws, off);
    const taskId = (JSON.parse(started.out) as { taskId: string }).taskId;
    run(process.execPath, [CLI, 'checkpoint', '--workspace', ws, '--task', taskId, '--json'], ws, off);
    let edit = 0;
    const change = (): { ms: number; rssMb: number } => {
      edit++;
      const picked = Array.from({ length: CHANGED }, (_, k) => (edit * 7919 + k * 4801) % files);
      for (const tree of [ws, gws]) for (const i of picked) fs.writeFileSync(path.join(tree, relOf(i)), content(i, edit));
      const add = run('git', [...GIT, 'add', '-A'], gws);
      const commit = run('git', [...GIT, 'commit', '-q', '-m', `edit ${edit}`], gws);
      return { ms: add.ms + commit.ms, rssMb: Math.max(add.rssMb, commit.rssMb) };
    };
    let lastId = '';
    /** Through the `waypoint` command (dist/waypoint), or `node dist/cli.js checkpoint` when `viaNode`. */
    const checkpoint = (label: string, viaNode = false): Timed => {
      const args = ['checkpoint', '--workspace', ws, '--task', taskId, '--label', label, '--json'];
      const cp = viaNode ? run(process.execPath, [CLI, ...args], ws, ON) : run(LAUNCHER, args, ws, ON);
      const changed = (JSON.parse(cp.out) as { filesChanged: number }).filesChanged;
      if (changed !== CHANGED) {
        const id = (JSON.parse(cp.out) as { checkpointId: string }).checkpointId;
        const d = spawnSync(process.execPath, [CLI, 'diff', '--workspace', ws, '--from', lastId, '--to', id], { encoding: 'utf8', env: { ...process.env, ...ON } });
        throw new Error(`${label}: the checkpoint saw ${changed} files changed, not ${CHANGED}:\n${d.stdout.slice(0, 3000)}${d.stderr}`);
      }
      lastId = (JSON.parse(cp.out) as { checkpointId: string }).checkpointId;
      return cp;
    };
    const first: Timed[] = [];
    const next: Timed[] = [];
    const gitFirst: number[] = [];
    const gitNext: number[] = [];
    const viaNode: Timed[] = [];
    const gitViaNode: number[] = [];
    const ownerRss: number[] = [];
    const ready: number[] = [];
    const warmScan: number[] = [];
    let watch = '';
    for (let r = 1; r <= rounds; r++) {
      await stopOwner(ws);
      gitFirst.push(change().ms);
      const f = checkpoint(`round ${r} first`);
      first.push(f);
      // The first call started the owner as it ended; the later calls come once it is warm.
      const ready0 = performance.now();
      const s = await warmOwner(ws);
      ready.push(performance.now() - ready0);
      if (s.status.warmUp !== 'done') throw new Error(`round ${r}: the owner's first scan did not vouch: ${JSON.stringify(s)}`);
      warmScan.push(s.status.warmUpMs ?? NaN);
      watch = s.status.watch.kind === 'watching' ? `watching ${s.status.watch.dirs} directories` : s.status.watch.kind;
      const line = [`round ${r}: first ${fmtMs(f.ms)} (${f.rssMb.toFixed(0)} MB) vs git ${fmtMs(gitFirst[gitFirst.length - 1])}; owner warm ${fmtMs(ready[ready.length - 1])} after (its scan ${fmtMs(s.status.warmUpMs ?? NaN)})`];
      for (let k = 0; k < later; k++) {
        gitNext.push(change().ms);
        const n = checkpoint(`round ${r} later ${k}`);
        next.push(n);
        line.push(`later ${fmtMs(n.ms)} vs git ${fmtMs(gitNext[gitNext.length - 1])}`);
      }
      gitViaNode.push(change().ms);
      viaNode.push(checkpoint(`round ${r} later, node dist/cli.js`, true));
      line.push(`node dist/cli.js ${fmtMs(viaNode[viaNode.length - 1].ms)} vs git ${fmtMs(gitViaNode[gitViaNode.length - 1])}`);
      ownerRss.push(status(ws).status!.rssBytes / 2 ** 20);
      log(`${line.join('; ')}; owner ${ownerRss[ownerRss.length - 1].toFixed(0)} MB, ${watch}`);
    }
    // Hook calls to the running owner, against a bare Node start.
    const payload = (event: string) => JSON.stringify({ session_id: '0b1e7c2a-5d4f-4e1a-9c3b-bench0000038', transcript_path: path.join(ws, '.t.jsonl'), cwd: ws, permission_mode: 'default', hook_event_name: event, prompt: 'bench' });
    const timedSpawn = (args: string[], input?: string): number => {
      const t0 = performance.now();
      const x = spawnSync(process.execPath, args, { input, stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, ...ON } });
      if (x.status !== 0) throw new Error(`${args.join(' ')} exited ${x.status}: ${x.stderr}`);
      if (String(x.stderr).includes('not recorded')) throw new Error(`the hook did not record: ${x.stderr}`);
      return performance.now() - t0;
    };
    const hookRuns = o.quick ? 4 : 15;
    const hook: number[] = [];
    const bare: number[] = [];
    timedSpawn([CLI, 'hook', 'claude-code', '--workspace', ws], payload('SessionStart'));
    for (let i = 0; i < hookRuns; i++) {
      bare.push(timedSpawn(['-e', '0']));
      hook.push(timedSpawn([CLI, 'hook', 'claude-code', '--workspace', ws], payload('UserPromptSubmit')));
    }
    await stopOwner(ws);
    const fm = median(first.map((x) => x.ms));
    const gf = median(gitFirst);
    const nm = median(next.map((x) => x.ms));
    const gn = median(gitNext);
    const vm = median(viaNode.map((x) => x.ms));
    const gv = median(gitViaNode);
    const rss = Math.max(...first.map((x) => x.rssMb), ...next.map((x) => x.rssMb), ...viaNode.map((x) => x.rssMb));
    const hm = median(hook);
    const bm = median(bare);
    const n = files.toLocaleString('en');
    const rows: Row[] = [
      { measure: `first call, no owner (does its own work, then starts the background owner), ${n} files, ${CHANGED} changed (median of ${rounds})`, waypoint: fmtMs(fm), baseline: `${fmtMs(gf)} git add -A && git commit`, ratio: `${(fm / gf).toFixed(2)}×`, target: '≤ 1.5×', ok: fm / gf <= 1.5 },
      { measure: `later calls, background owner (${watch}), same tree, \`waypoint checkpoint\` (dist/waypoint) (median of ${next.length})`, waypoint: fmtMs(nm), baseline: `${fmtMs(gn)} git add -A && git commit`, ratio: `${(nm / gn).toFixed(2)}×`, target: '≤ 0.25×', ok: nm / gn <= 0.25 },
      { measure: `later calls as \`node dist/cli.js checkpoint\` (Node's start included; median of ${viaNode.length})`, waypoint: fmtMs(vm), baseline: `${fmtMs(gv)} git add -A && git commit`, ratio: `${(vm / gv).toFixed(2)}×`, target: 'info', ok: null },
      { measure: `background owner warm after the first call returned (its watcher's first scan ${fmtMs(median(warmScan))}), median`, waypoint: fmtMs(median(ready)), baseline: '-', ratio: '-', target: 'info', ok: null },
      { measure: 'peak RSS of the calling CLI process (max of all calls)', waypoint: `${rss.toFixed(0)} MB`, baseline: '-', ratio: '-', target: '≤ 150 MB', ok: rss <= 150 },
      { measure: 'resident size of the background owner (max of the rounds)', waypoint: `${Math.max(...ownerRss).toFixed(0)} MB`, baseline: '-', ratio: '-', target: 'bounded (leaves past 512 MB)', ok: null },
      { measure: `hook call, background owner (median of ${hookRuns})`, waypoint: fmtMs(hm), baseline: `${fmtMs(bm)} node -e 0`, ratio: `+${fmtMs(hm - bm)}`, target: '≤ +100 ms', ok: hm - bm <= 100 },
    ];
    printTable('Background owner: first call vs later calls vs git', rows);
    return rows;
  } finally {
    await stopOwner(ws).catch(() => undefined);
    cleanup();
  }
}

if (require.main === module) void main({ quick: process.argv.includes('--quick') });
