/**
 * `waypoint task start` in a fresh clone (issue 38): the first thing an agent's session
 * does in a repository nobody has recorded yet — create the store and take the task's
 * base checkpoint of every file — as one whole process, side by side with the shadow git
 * other agent tools keep for the same purpose (`git --git-dir=SHADOW --work-tree=WS`
 * `init`, `add -A`, `commit`: three processes). The clone: 2,807 files of real source
 * (a vite checkout's count; the files are copied from node_modules, as the snapshot
 * bench's are, since a bench cannot fetch a repository) in a git repository with one
 * commit and a .gitignore. Each round starts from a fresh copy of it for each side.
 *
 * The call runs as a user's would, with the background owner on (the default): it starts
 * one as it ends and leaves the compression of what it stored raw to it. Between rounds
 * the bench waits (untimed) for that owner to compress and stops it. Also reported: the
 * call with the background owner off (it then compresses before it ends), the same
 * `task start` inside an already running process (Engine.open + startTask), and
 * `node -e 0`.
 *
 *   npm run bench -- --only=clone
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Engine } from '../../src/core/engine/engine';
import { status, stopOwner } from './background.bench';
import { GIT, run } from './fresh.bench';
import { benchDir, fmtMs, median, printTable, type Row } from './util';

const ROOT = path.resolve(__dirname, '..', '..');
/** The `waypoint` command as a user's shell runs it (Linux, macOS). */
const LAUNCHER = path.join(ROOT, 'dist', 'waypoint');
const FILES = 2_807;
const SOURCE = /\.(?:[cm]?[jt]sx?|json|md|css|html|vue|svelte|ya?ml)$/;
const MAX_BYTES = 256 * 1024;
/** The background owner on, as by default (the bench runner turns it off for every other section). */
const ON = { WAYPOINT_NO_DAEMON: '', WAYPOINT_DAEMON: '1', WAYPOINT_DAEMON_IDLE_SECONDS: '600' };

/** The first `n` source files under node_modules, sorted by path: real text of real sizes. */
function sources(dir: string, n: number): { abs: string; rel: string }[] {
  const out: { abs: string; rel: string }[] = [];
  const walk = (d: string, rel: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      if (out.length >= n) return;
      const abs = path.join(d, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(abs, r);
      else if (e.isFile() && SOURCE.test(e.name) && fs.statSync(abs).size <= MAX_BYTES) out.push({ abs, rel: r });
    }
  };
  walk(dir, '');
  return out;
}

export async function main(o: { quick?: boolean } = {}): Promise<Row[]> {
  spawnSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'ignore' });
  const rounds = Number(process.env.WAYPOINT_BENCH_ROUNDS) || (o.quick ? 2 : 7);
  const { dir, cleanup } = benchDir('wp-bench-clone-');
  const log = (s: string) => process.stderr.write(`[clone] ${s}\n`);
  try {
    // The clone, made once: sources under packages/, a .gitignore, one commit.
    const template = path.join(dir, 'template');
    const picked = sources(path.join(ROOT, 'node_modules'), FILES - 1);
    if (picked.length < FILES - 1) throw new Error(`only ${picked.length} source files under node_modules`);
    let bytes = 0;
    for (const s of picked) {
      const dest = path.join(template, 'packages', s.rel.replace(/(^|\/)node_modules\//g, '$1deps/'));
      fs.mkdirSync(path.dirname(dest), { recursive: true });
      fs.copyFileSync(s.abs, dest);
      bytes += fs.statSync(dest).size;
    }
    fs.writeFileSync(path.join(template, '.gitignore'), '/node_modules/\n/dist/\n');
    run('git', ['init', '-q'], template);
    run('git', [...GIT, 'add', '-A'], template);
    run('git', [...GIT, 'commit', '-q', '-m', 'clone'], template);
    const tracked = spawnSync('git', ['ls-files'], { cwd: template, encoding: 'utf8' }).stdout.split('\n').filter(Boolean).length;
    if (tracked !== FILES) throw new Error(`the clone tracks ${tracked} files, not ${FILES}`);
    log(`clone: ${tracked} files, ${(bytes / 2 ** 20).toFixed(1)} MB`);

    let copies = 0;
    /** A fresh copy of the clone (untimed), its pages written back so no side pays for the copy. */
    const fresh = (): string => {
      const ws = path.join(dir, `ws${copies++}`);
      const r = spawnSync('cp', ['-a', template, ws]);
      if (r.status !== 0) throw new Error(`cp exited ${r.status}`);
      spawnSync('sync');
      return ws;
    };
    const shadowGit = (ws: string): number => {
      const git = ['--git-dir', path.join(dir, `shadow${copies}`), '--work-tree', ws, ...GIT];
      return run('git', [...git, 'init', '-q'], ws).ms + run('git', [...git, 'add', '-A'], ws).ms + run('git', [...git, 'commit', '-q', '-m', 'base'], ws).ms;
    };
    const rawPacks = (ws: string) => fs.readdirSync(path.join(ws, '.waypoint', 'objects', 'pack')).filter((n) => n.endsWith('-u.pack')).length;
    const whole = async (ws: string, owner: boolean): Promise<{ ms: number; rssMb: number }> => {
      const r = run(LAUNCHER, ['task', 'start', '--goal', 'clone bench', '--json', '--workspace', ws], ws, owner ? ON : { WAYPOINT_NO_DAEMON: '1' });
      const id = (JSON.parse(r.out) as { taskId?: string }).taskId;
      if (!id) throw new Error(`task start printed ${r.out}`);
      if (owner) {
        // Untimed: the owner the call started compresses what it stored raw; then it is stopped.
        for (const until = Date.now() + 120_000; !status(ws).owner?.background || rawPacks(ws); ) {
          if (Date.now() > until) throw new Error(`the background owner did not compress the call's content: ${JSON.stringify(status(ws))}`);
          await new Promise((res) => setTimeout(res, 50));
        }
        await stopOwner(ws);
      } else if (rawPacks(ws)) throw new Error('a call with no owner to come left content uncompressed');
      return r;
    };
    const inProcess = async (ws: string): Promise<number> => {
      const t0 = performance.now();
      const engine = await Engine.open({ workspace: ws });
      try {
        await engine.startTask({ goal: 'clone bench' });
        return performance.now() - t0;
      } finally {
        await engine.close();
      }
    };
    const bare = (): number => {
      const t0 = performance.now();
      spawnSync(process.execPath, ['-e', '0']);
      return performance.now() - t0;
    };

    // One untimed round of each: page cache, the CLI bundle, sql.js compiled once in this process.
    shadowGit(fresh());
    await whole(fresh(), true);
    await inProcess(fresh());
    const git: number[] = [];
    const cli: number[] = [];
    const rss: number[] = [];
    const inproc: number[] = [];
    const off: number[] = [];
    const node: number[] = [];
    for (let r = 0; r < rounds; r++) {
      // The order alternates, so neither side always runs on the other's writeback.
      const sides = [
        async () => git.push(shadowGit(fresh())),
        async () => {
          const w = await whole(fresh(), true);
          cli.push(w.ms);
          rss.push(w.rssMb);
        },
      ];
      if (r % 2) sides.reverse();
      for (const side of sides) await side();
      off.push((await whole(fresh(), false)).ms);
      inproc.push(await inProcess(fresh()));
      node.push(bare());
      log(`round ${r + 1}: shadow git ${fmtMs(git[r])}, waypoint task start ${fmtMs(cli[r])} (${rss[r].toFixed(0)} MB; owner off ${fmtMs(off[r])}), in process ${fmtMs(inproc[r])}, node -e 0 ${fmtMs(node[r])}`);
      // Each round's copies go (the disk is not the figure).
      for (const e of fs.readdirSync(dir)) if (e !== 'template') fs.rmSync(path.join(dir, e), { recursive: true, force: true });
    }
    const g = median(git);
    const c = median(cli);
    const ip = median(inproc);
    const rows: Row[] = [
      { measure: `\`waypoint task start\` in a fresh clone (${FILES.toLocaleString('en')} files), whole process (median of ${rounds})`, waypoint: fmtMs(c), baseline: `${fmtMs(g)} shadow git init + add -A + commit`, ratio: `${(c / g).toFixed(2)}×`, target: '≤ 0.25×', ok: c / g <= 0.25 },
      { measure: 'the same, background owner off (the call compresses what it stored before it ends)', waypoint: fmtMs(median(off)), baseline: `${fmtMs(g)} shadow git`, ratio: `${(median(off) / g).toFixed(2)}×`, target: 'info', ok: null },
      { measure: 'the same task start inside a running process (Engine.open + startTask)', waypoint: fmtMs(ip), baseline: `${fmtMs(g)} shadow git`, ratio: `${(ip / g).toFixed(2)}×`, target: 'info', ok: null },
      { measure: 'a bare Node start (`node -e 0`), for scale', waypoint: fmtMs(median(node)), baseline: `${fmtMs(g)} shadow git`, ratio: `${(median(node) / g).toFixed(2)}×`, target: 'info', ok: null },
      { measure: 'peak RSS of the task start process', waypoint: `${Math.max(...rss).toFixed(0)} MB`, baseline: '-', ratio: '-', target: 'info', ok: null },
    ];
    printTable('Task start in a fresh clone: whole process vs a shadow git', rows);
    return rows;
  } finally {
    cleanup();
  }
}
