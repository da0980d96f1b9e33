// `npm run soak -- --fleet`: the team store under a fleet, with the database crashing and
// the network cutting connections, for minutes, then checked against PostgreSQL itself.
//
//   npm run soak -- --fleet                       3 machines × 10 workspaces, 50 agents, 10 minutes
//   npm run soak -- --fleet --short               3 × 2 workspaces, 6 agents, 45 s (what CI runs)
//   npm run soak -- --fleet --machines=3 --workspaces=10 --agents=50 --minutes=10 --seed=1
//
// What runs: a throwaway PostgreSQL cluster (test/support/pgCluster.ts) behind a TCP
// proxy that can cut every live connection (pgDropProxy.ts). machines × workspaces
// workspace folders; each is written by one process of its own (fleetAgentChild.ts, the
// one owner per folder that the product has: the editor or `waypoint serve`) with
// WAYPOINT_MACHINE set to its machine's name, driving that workspace's share of the agents
// side by side, each agent under its own lease owner. On a 2-core machine "50 agents" are
// 50 agents in 30 processes, not 1,500 processes (see docs/team-store.md).
//
// Chaos, in rounds of the three kinds in a seeded order, a seeded pause apart:
//  - PostgreSQL stopped with `pg_ctl stop -m immediate` (a crash: no checkpoint, the WAL
//    replayed on start) and started again after 0.2–1.5 s;
//  - every connection through the proxy cut (both sockets destroyed);
//  - a workspace process SIGKILLed with its agents. Nothing opens that workspace until
//    `tasks --all`'s listing (the same query, queryTaskListingsJson) shows none of its
//    tasks active: the store-wide lease sweep run by the other processes must interrupt
//    them within BOUND_MS. Then a process on ANOTHER machine name opens the folder and its
//    agents resume the interrupted tasks and finish them (taken over elsewhere).
//
// Checked at the end, from PostgreSQL directly (every process stopped first):
//  - every acknowledged call's event is in the store (by the idempotency key the call
//    carried; heartbeats, which carry none, by count per task);
//  - no duplicate: each key once per workspace, each acknowledged call's event once;
//  - order: each workspace's seqs are 1..head without a gap, and each agent's acknowledged
//    calls are in the log in the order they were answered;
//  - projections equal a rebuild: in one snapshot, the task summaries PostgreSQL holds
//    (what `tasks --all` lists) and every projection row (steps, side effects, leases, …)
//    equal a fold of the workspace's events, and that fold passes the projection's own
//    verify (the rebuild `waypoint verify` runs);
//  - every killed process's tasks were shown interrupted within BOUND_MS of the kill;
//  - the fleet recovered: calls were answered after the last chaos event, and none was
//    refused (every call the workload makes is one its task's state allows).
// Printed: a table of the sizes, the chaos counts, p50/p99 of the calls' latency (each
// call is an append: the engine answers once its events are committed), and the load.
// Exit code 1 with the failed checks named when any fails.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Pool } from 'pg';
import { ACTIVE_TASK_STATES } from '../../src/core/model/stateMachine';
import { SqlProjection } from '../../src/core/store/projection';
import { EVENT_COLUMNS, rowToEvent } from '../../src/core/store/postgres/rows';
import { compareRows } from '../../src/core/store/postgres/projectionRows';
import { queryTaskListingsJson } from '../../src/core/store/postgres/taskListing';
import type { FleetAgentConfig } from '../support/fleetAgentChild';
import { PgCluster } from '../support/pgCluster';
import { PgDropProxy } from '../support/pgDropProxy';

export interface FleetArgs {
  machines: number;
  workspaces: number;
  agents: number;
  minutes: number;
  seed: number;
  short: boolean;
  keep: boolean;
}

export function parseFleetArgs(argv: string[]): FleetArgs {
  const short = argv.includes('--short');
  const a: FleetArgs = short
    ? { machines: 3, workspaces: 2, agents: 6, minutes: 0.75, seed: 1, short, keep: false }
    : { machines: 3, workspaces: 10, agents: 50, minutes: 10, seed: 1, short, keep: false };
  for (const arg of argv) {
    if (arg === '--fleet' || arg === '--short') continue;
    const m = /^--(machines|workspaces|agents|minutes|seed)=(\d+(?:\.\d+)?)$/.exec(arg);
    if (m) a[m[1] as 'machines' | 'workspaces' | 'agents' | 'minutes' | 'seed'] = Number(m[2]);
    else if (arg === '--keep') a.keep = true;
    else throw new Error(`unknown argument ${arg}; use --fleet [--short] --machines=N --workspaces=N --agents=N --minutes=N --seed=N --keep`);
  }
  if (a.machines < 2) throw new Error('--machines must be at least 2 (a killed workspace is taken over on another machine)');
  if (a.agents < a.machines * a.workspaces) throw new Error(`--agents must be at least machines × workspaces (${a.machines * a.workspaces}): every workspace has an agent`);
  return a;
}

const CHILD = path.join(__dirname, '..', 'support', 'fleetAgentChild.ts');
/** The agents' lease. */
const LEASE_MS = 5_000;
/**
 * How soon a killed process's tasks must show interrupted: the lease (5 s), the writer
 * seen gone (WRITER_STALE_MS, 10 s), a sweep turn (SWEEP_EVERY_MS 3 s + 1 s jitter), and
 * 11 s of slack for a loaded 2-core machine and a database restart in between.
 */
export const BOUND_MS = 30_000;

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Workspace {
  name: string;
  folder: string;
  machine: number;
  agents: string[];
  id?: string;
  proc?: Proc;
  generation: number;
  /** Killed and not yet reopened. */
  dead: boolean;
}

interface Proc {
  ws: Workspace;
  child: ChildProcess;
  ackFile: string;
  machine: string;
  ready: Promise<void>;
  exited: Promise<number | null>;
  killedByUs: boolean;
  stopping: boolean;
  stderr: string;
}

interface AckLine {
  agent: string;
  op: string;
  task: string;
  key?: string;
  ms: number;
  at: number;
  why?: string;
}

interface Kill {
  ws: string;
  at: number;
  active: number;
  tookMs: number | null;
  movedTo: string;
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

export async function runFleet(args: FleetArgs): Promise<{ ok: boolean; failures: string[] }> {
  const t0 = Date.now();
  const random = rng(args.seed);
  const failures: string[] = [];
  const fail = (m: string) => {
    failures.push(m);
    process.stdout.write(`FAIL: ${m}\n`);
  };
  const say = (m: string) => process.stdout.write(`[fleet ${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s] ${m}\n`);
  const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'wp-fleet-')));
  const cluster = await PgCluster.create({ conf: { max_connections: Math.max(200, 12 * args.machines * args.workspaces + 50) } });
  const proxy = await PgDropProxy.start({ port: cluster.port });
  const url = proxy.url(cluster.url());
  const checker = new Pool({ connectionString: cluster.url(), max: 3 });
  checker.on('error', () => undefined);
  /** A checker query, retried across the database's restarts. */
  const q = async (sql: string, params: unknown[] = []): Promise<Record<string, unknown>[]> => {
    for (let i = 0; ; i++) {
      try {
        return (await checker.query(sql, params)).rows;
      } catch (e) {
        if (i >= 60) throw e;
        await sleep(500);
      }
    }
  };
  const machineName = (m: number) => `machine-${String.fromCharCode(97 + m)}`;
  const counts = { restarts: 0, restartMs: [] as number[], cuts: 0, dropped: 0, kills: 0, storeGone: 0, crashed: 0, spawned: 0 };
  const kills: Kill[] = [];
  /** When the database was down or the wire cut (wall clock), to tell the latency of calls that met one from the rest. */
  const outages: [number, number][] = [];
  const loads: number[] = [];
  const loadTimer = setInterval(() => loads.push(os.loadavg()[0]), 5_000);
  const procs: Proc[] = [];
  const workspaces: Workspace[] = [];
  let ending = false;

  for (let m = 0; m < args.machines; m++) {
    for (let w = 0; w < args.workspaces; w++) {
      const name = `${machineName(m)}/ws${w + 1}`;
      const folder = path.join(root, machineName(m), `ws${w + 1}`);
      fs.mkdirSync(folder, { recursive: true });
      fs.writeFileSync(path.join(folder, 'README.md'), `# ${name}\n`);
      workspaces.push({ name, folder, machine: m, agents: [], generation: 0, dead: false });
    }
  }
  for (let k = 0; k < args.agents; k++) workspaces[k % workspaces.length].agents.push(`agent-${k + 1}`);
  const ackDir = path.join(root, 'acks');
  fs.mkdirSync(ackDir);

  const spawnProc = (ws: Workspace, machine: number): Proc => {
    ws.generation++;
    ws.machine = machine;
    const agents = ws.agents.map((a) => (ws.generation === 1 ? a : `${a}.g${ws.generation}`));
    const ackFile = path.join(ackDir, `${ws.name.replace('/', '-')}.g${ws.generation}.jsonl`);
    fs.writeFileSync(ackFile, '');
    const config: FleetAgentConfig = {
      url,
      workspace: ws.folder,
      agents,
      ackFile,
      leaseMs: LEASE_MS,
      steps: 3,
      beats: 3,
      pauseMs: args.short ? [150, 600] : [300, 1200],
      seed: args.seed * 1000 + counts.spawned,
    };
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, WAYPOINT_MACHINE: machineName(machine), WAYPOINT_STORE: '', WAYPOINT_NO_DAEMON: '1' },
    });
    counts.spawned++;
    let out = '';
    const p: Proc = { ws, child, ackFile, machine: machineName(machine), killedByUs: false, stopping: false, stderr: '', ready: Promise.resolve(), exited: Promise.resolve(null) };
    p.ready = new Promise<void>((resolve, reject) => {
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (/^ready /m.test(out)) resolve();
      });
      child.once('exit', (code) => reject(new Error(`${ws.name} exited ${code} before it was ready: ${p.stderr.slice(-2000)}`)));
    });
    p.ready.catch(() => undefined);
    child.stderr!.on('data', (d: Buffer) => {
      p.stderr = (p.stderr + d.toString()).slice(-20_000);
    });
    p.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    void p.exited.then((code) => {
      if (p.killedByUs || p.stopping || ending) return;
      // The store could not take a call for longer than the engine retries (or the writer was fenced): it reopens, as a person's editor would.
      if (code === 75) counts.storeGone++;
      else {
        counts.crashed++;
        fail(`${ws.name}'s process (generation ${ws.generation}) exited with code ${code}: ${p.stderr.slice(-3000)}`);
      }
      say(`${ws.name}'s process exited (${code}); opening it again`);
      if (ws.proc === p) ws.proc = spawnProc(ws, ws.machine);
    });
    ws.proc = p;
    procs.push(p);
    return p;
  };

  const activeTasks = async (ws: Workspace): Promise<number> => {
    const json = await queryTaskListingsJson((sql, params) => q(sql, params), { workspaceId: ws.id!, states: ACTIVE_TASK_STATES });
    return (JSON.parse(json ?? '[]') as unknown[]).length;
  };

  /** A workspace's process SIGKILLed; once its tasks show interrupted, opened on another machine. */
  const killOne = async (ws: Workspace): Promise<void> => {
    const p = ws.proc!;
    p.killedByUs = true;
    ws.dead = true;
    p.child.kill('SIGKILL');
    const at = Date.now();
    await p.exited;
    counts.kills++;
    const kill: Kill = { ws: ws.name, at, active: await activeTasks(ws), tookMs: null, movedTo: '' };
    kills.push(kill);
    say(`killed ${ws.name} (${p.machine}) with ${kill.active} active tasks`);
    while (Date.now() - at < BOUND_MS + 30_000) {
      if ((await activeTasks(ws)) === 0) {
        kill.tookMs = Date.now() - at;
        break;
      }
      await sleep(250);
    }
    if (kill.tookMs === null) fail(`${ws.name}: the killed process's tasks were still active ${((BOUND_MS + 30_000) / 1000).toFixed(0)} s after the kill`);
    else if (kill.tookMs > BOUND_MS) fail(`${ws.name}: the killed process's tasks showed interrupted after ${kill.tookMs} ms, over the bound of ${BOUND_MS} ms`);
    else say(`${ws.name}: its tasks showed interrupted ${(kill.tookMs / 1000).toFixed(1)} s after the kill`);
    const other = (ws.machine + 1 + Math.floor(random() * (args.machines - 1))) % args.machines;
    kill.movedTo = machineName(other);
    ws.dead = false;
    if (!ending) {
      const np = spawnProc(ws, other);
      await np.ready.catch((e) => fail(`the replacement of ${ws.name} on ${machineName(other)} did not open: ${(e as Error).message}`));
    }
  };

  let lastChaosAt = 0;
  const pending: Promise<void>[] = [];
  let ok = false;
  try {
    say(`cluster on port ${cluster.port}, proxy on ${proxy.port}; ${workspaces.length} workspaces, ${args.agents} agents, ${args.minutes} min, seed ${args.seed}`);
    for (const ws of workspaces) spawnProc(ws, ws.machine);
    await Promise.all(workspaces.map((ws) => ws.proc!.ready));
    for (const ws of workspaces) ws.id = (JSON.parse(fs.readFileSync(path.join(ws.folder, '.waypoint', 'workspace-id.json'), 'utf8')) as { id: string }).id;
    say(`all ${workspaces.length} workspace processes open`);
    const runStart = Date.now();
    const end = runStart + args.minutes * 60_000;
    const gap: [number, number] = args.short ? [4_000, 7_000] : [8_000, 16_000];
    const maxDead = Math.max(1, Math.floor(workspaces.length / 10));
    let round: string[] = [];
    for (;;) {
      await sleep(gap[0] + random() * (gap[1] - gap[0]));
      if (Date.now() >= end) break;
      if (!round.length) round = ['restart', 'cut', 'kill'].sort(() => random() - 0.5);
      const what = round.shift()!;
      lastChaosAt = Date.now();
      if (what === 'restart') {
        const down = 200 + Math.floor(random() * 1300);
        const from = Date.now();
        const took = await cluster.restartAsync('immediate', down);
        outages.push([from, Date.now()]);
        counts.restarts++;
        counts.restartMs.push(took);
        say(`PostgreSQL stopped -m immediate and started again: unreachable ${(took / 1000).toFixed(1)} s`);
      } else if (what === 'cut') {
        const n = proxy.cut();
        outages.push([Date.now(), Date.now()]);
        counts.cuts++;
        say(`cut ${n} connections`);
      } else {
        const live = workspaces.filter((w) => !w.dead && w.proc && !w.proc.killedByUs);
        if (workspaces.filter((w) => w.dead).length >= maxDead || !live.length) continue;
        pending.push(killOne(live[Math.floor(random() * live.length)]));
      }
      lastChaosAt = Date.now();
    }
    say('chaos over; waiting for killed workspaces to be taken over');
    await Promise.all(pending);
    const runS = (Date.now() - runStart) / 1000;
    // Every agent gets a moment past the last chaos (so recovery shows), then stops.
    await sleep(3_000);
    ending = true;
    const live = workspaces.map((w) => w.proc!).filter((p) => p.child.exitCode === null && p.child.signalCode === null);
    for (const p of live) {
      p.stopping = true;
      p.child.kill('SIGTERM');
    }
    await Promise.all(
      live.map(async (p) => {
        const t = setTimeout(() => {
          fail(`${p.ws.name}'s process did not stop within 60 s of SIGTERM`);
          p.child.kill('SIGKILL');
        }, 60_000);
        const code = await p.exited;
        clearTimeout(t);
        if (code !== 0 && code !== null) fail(`${p.ws.name}'s process ended with code ${code} when stopped: ${p.stderr.slice(-2000)}`);
      }),
    );
    clearInterval(loadTimer);
    say(`all processes stopped; checking`);

    // ---- The checks, against PostgreSQL directly. ----
    const acks = new Map<string, AckLine[]>(); // by workspace name
    for (const p of procs) {
      const lines = fs
        .readFileSync(p.ackFile, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as AckLine);
      acks.set(p.ws.name, [...(acks.get(p.ws.name) ?? []), ...lines]);
    }
    const all = [...acks.values()].flat();
    const acked = all.filter((a) => a.op !== 'refused');
    const refused = all.filter((a) => a.op === 'refused');
    let lost = 0;
    let duplicates = 0;
    let orderViolations = 0;
    let projectionMismatches = 0;
    let eventsInStore = 0;
    for (const ws of workspaces) {
      const c = await checker.connect();
      let rows: Record<string, unknown>[];
      let summary: Record<string, unknown>[];
      let head: number;
      let rowDiffs: Awaited<ReturnType<typeof compareRows>>;
      try {
        // One snapshot: the events, the head and the summaries as of the same instant.
        await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
        head = Number((await c.query('SELECT head_seq FROM waypoint.workspaces WHERE id = $1', [ws.id])).rows[0]?.head_seq ?? -1);
        rows = (await c.query(`SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1 ORDER BY seq`, [ws.id])).rows;
        summary = (await c.query('SELECT id, title, state, attempt, created_at::float8 AS created_at, updated_at::float8 AS updated_at FROM waypoint.tasks WHERE workspace_id = $1 ORDER BY id', [ws.id])).rows;
        // Every projection row PostgreSQL holds (projectionRows.ts) against a fold of the same events, in the same snapshot.
        const whole = await SqlProjection.empty();
        try {
          whole.apply(rows.map(rowToEvent));
          rowDiffs = await compareRows(c, ws.id!, whole.db);
        } catch (e) {
          rowDiffs = [{ table: '(fold)', live: 0, rebuilt: 0, firstDiff: (e as Error).message }];
        } finally {
          whole.close();
        }
        await c.query('COMMIT');
      } finally {
        c.release();
      }
      eventsInStore += rows.length;
      const gap = rows.findIndex((r, i) => Number(r.seq) !== i + 1);
      if (gap >= 0) {
        orderViolations++;
        fail(`${ws.name}: event #${gap + 1} in seq order has seq ${rows[gap].seq} (a gap or a repeat)`);
      }
      if (head !== rows.length) fail(`${ws.name}: head_seq ${head}, but ${rows.length} events`);
      // Keys: each once; an acknowledged call's key is its event's key, or the prefix before '#' of the events it wrote.
      const keys = new Set<string>();
      const seqOf = new Map<string, number>();
      const beatsOf = new Map<string, number>();
      for (const r of rows) {
        const key = String(r.key);
        if (keys.has(key)) {
          duplicates++;
          fail(`${ws.name}: key ${key} twice`);
        }
        keys.add(key);
        const k = key.split('#')[0];
        if (!seqOf.has(k)) seqOf.set(k, Number(r.seq));
        if (r.type === 'lease.heartbeat') beatsOf.set(String(r.task_id), (beatsOf.get(String(r.task_id)) ?? 0) + 1);
      }
      const mine = (acks.get(ws.name) ?? []).filter((a) => a.op !== 'refused');
      const lastSeqOfAgent = new Map<string, number>();
      const ackedBeats = new Map<string, number>();
      for (const a of mine) {
        if (a.op === 'hb') {
          ackedBeats.set(a.task, (ackedBeats.get(a.task) ?? 0) + 1);
          continue;
        }
        const seq = seqOf.get(a.key!);
        if (seq === undefined) {
          lost++;
          if (lost <= 10) fail(`${ws.name}: acknowledged ${a.op} (key ${a.key}, task ${a.task}) is not in the store`);
          continue;
        }
        const before = lastSeqOfAgent.get(a.agent) ?? 0;
        if (seq <= before) {
          orderViolations++;
          if (orderViolations <= 5) fail(`${ws.name}: ${a.agent}'s ${a.op} (key ${a.key}) is at seq ${seq}, before its previous answered call's ${before}`);
        }
        lastSeqOfAgent.set(a.agent, seq);
      }
      for (const [task, n] of ackedBeats) {
        const have = beatsOf.get(task) ?? 0;
        if (have < n) {
          lost += n - have;
          fail(`${ws.name}: task ${task} has ${have} heartbeats in the store, ${n} were acknowledged`);
        }
      }
      // Projections equal a rebuild: the summaries PostgreSQL holds against a fold of the same events, and that fold against the projection's own rebuild.
      const events = rows.map(rowToEvent);
      const fold = await SqlProjection.empty();
      try {
        fold.apply(events);
      } catch (e) {
        projectionMismatches++;
        fail(`${ws.name}: its events do not fold: ${(e as Error).message}`);
        continue;
      }
      const folded = fold.db.all<Record<string, unknown>>('SELECT id, title, state, attempt, created_at, updated_at FROM tasks ORDER BY id');
      const norm = (xs: Record<string, unknown>[]) => JSON.stringify(xs.map((x) => ({ ...x, created_at: Number(x.created_at), updated_at: Number(x.updated_at), attempt: Number(x.attempt) })));
      if (norm(summary) !== norm(folded)) {
        projectionMismatches++;
        fail(`${ws.name}: the task summaries in PostgreSQL differ from a fold of its events`);
      }
      if (rowDiffs.length) {
        projectionMismatches++;
        fail(`${ws.name}: the projection rows in PostgreSQL differ from a fold of its events: ${JSON.stringify(rowDiffs).slice(0, 500)}`);
      }
      const check = await fold.verify(events);
      if (!check.ok) {
        projectionMismatches++;
        fail(`${ws.name}: the projection differs from a rebuild: ${JSON.stringify(check.differences).slice(0, 500)}`);
      }
    }
    if (!acked.length) fail('no call was acknowledged');
    // The workload only makes calls its tasks' states allow: a refusal means a task was not in the state its agent left it in.
    if (refused.length) fail(`${refused.length} calls refused by the engine, e.g. ${refused[0].agent}: ${refused[0].why}`);
    if (lastChaosAt && !acked.some((a) => a.at > lastChaosAt)) fail('no call was answered after the last chaos event: the fleet did not recover');
    for (const k of kills) if (k.active === 0) say(`(note: ${k.ws} had no active task when killed)`);
    if (!counts.restarts) fail('no PostgreSQL restart happened (run longer)');
    if (!counts.cuts) fail('no connection cut happened (run longer)');
    if (!counts.kills) fail('no process was killed (run longer)');

    // ---- The table. ----
    const lat = acked.map((a) => a.ms).sort((x, y) => x - y);
    const beatLat = acked.filter((a) => a.op === 'hb').map((a) => a.ms).sort((x, y) => x - y);
    // Calls that neither overlapped an outage nor ended within 2 s after one (reconnecting, recovery's first commits).
    const calm = acked.filter((a) => !outages.some(([from, to]) => a.at - a.ms <= to + 2_000 && a.at >= from)).map((a) => a.ms).sort((x, y) => x - y);
    const ms = (x: number) => `${x.toFixed(1)} ms`;
    const byOp = new Map<string, number>();
    for (const a of acked) byOp.set(a.op, (byOp.get(a.op) ?? 0) + 1);
    const killTimes = kills.map((k) => k.tookMs ?? Infinity);
    const load = os.loadavg();
    const out: string[] = [];
    out.push(`\n## fleet soak: ${args.machines} machines × ${args.workspaces} workspaces, ${args.agents} agents, ${runS.toFixed(0)} s of chaos and takeovers (seed ${args.seed})\n`);
    out.push('| measure | value |');
    out.push('| --- | ---: |');
    out.push(`| workspaces (one writer process each) | ${workspaces.length} |`);
    out.push(`| agents (side by side in their workspace's process) | ${args.agents} |`);
    out.push(`| processes started (first ones, takeovers, reopens) | ${counts.spawned} |`);
    out.push(`| PostgreSQL restarts (\`-m immediate\`), unreachable for | ${counts.restarts}, ${counts.restartMs.length ? `${(Math.min(...counts.restartMs) / 1000).toFixed(1)}–${(Math.max(...counts.restartMs) / 1000).toFixed(1)} s` : '—'} |`);
    out.push(`| connection cuts (connections dropped) | ${counts.cuts} (${proxy.stats.dropped}) |`);
    out.push(`| processes SIGKILLed, their tasks taken over on another machine | ${counts.kills} |`);
    out.push(`| reopens after the store could not take a call (exit 75) | ${counts.storeGone} |`);
    out.push(`| acknowledged calls | ${acked.length} (${[...byOp].map(([k, v]) => `${k} ${v}`).join(', ')}) |`);
    out.push(`| calls refused by the engine (not acknowledged) | ${refused.length} |`);
    out.push(`| events in the store | ${eventsInStore} |`);
    out.push(`| acknowledged but missing | ${lost} |`);
    out.push(`| duplicate keys | ${duplicates} |`);
    out.push(`| order violations (gaps, acked calls out of order) | ${orderViolations} |`);
    out.push(`| workspaces whose projections differ from a rebuild | ${projectionMismatches} |`);
    const maxKill = Math.max(...killTimes);
    out.push(`| kill → tasks shown interrupted, max (bound) | ${!kills.length ? '—' : maxKill === Infinity ? `not within ${(BOUND_MS + 30_000) / 1000} s` : `${(maxKill / 1000).toFixed(1)} s`} (${BOUND_MS / 1000} s) |`);
    out.push(`| call latency p50 / p99 / max, all acknowledged | ${ms(quantile(lat, 0.5))} / ${ms(quantile(lat, 0.99))} / ${ms(lat[lat.length - 1] ?? NaN)} |`);
    out.push(`| heartbeat latency p50 / p99 | ${ms(quantile(beatLat, 0.5))} / ${ms(quantile(beatLat, 0.99))} |`);
    out.push(`| call latency p50 / p99 away from outages (${calm.length} calls that met no restart or cut) | ${ms(quantile(calm, 0.5))} / ${ms(quantile(calm, 0.99))} |`);
    out.push(`| load average, 1 min: mean / max during the run; 1/5/15 at the end | ${loads.length ? (loads.reduce((a, b) => a + b, 0) / loads.length).toFixed(1) : '—'} / ${loads.length ? Math.max(...loads).toFixed(1) : '—'}; ${load.map((x) => x.toFixed(1)).join(' / ')} |`);
    out.push(`| cores | ${os.availableParallelism?.() ?? os.cpus().length} |`);
    out.push(`\nbound = lease ${LEASE_MS / 1000} s + writer seen gone 10 s + a sweep turn ≤ 4 s + slack; latency is from the call to its answer (its events committed), outages included.`);
    process.stdout.write(out.join('\n') + '\n');
    ok = failures.length === 0;
    process.stdout.write(ok ? '\nfleet soak: passed\n' : `\nfleet soak: FAILED (${failures.length}):\n${failures.map((f) => `- ${f}`).join('\n')}\n`);
  } finally {
    ending = true;
    clearInterval(loadTimer);
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await checker.end().catch(() => undefined);
    await proxy.close().catch(() => undefined);
    if (args.keep) {
      cluster.stop('fast');
      process.stdout.write(`kept the workspaces and ack files at ${root}, the (stopped) cluster at ${cluster.dir}\n`);
    } else {
      cluster.remove();
      fs.rmSync(root, { recursive: true, force: true });
    }
  }
  return { ok, failures };
}
