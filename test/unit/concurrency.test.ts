import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { WaypointEvent } from '../../src/core/model/schema';
import { readLock } from '../../src/core/store/ownerLock';
import { readDiscovery } from '../../src/ownership/discovery';
import { bundleScript } from '../support/bundle';
import { buildCli, httpClient, serve, stdioSession, waitExit, type Served, type StdioSession } from '../support/mcp';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * Concurrency at the doors, with real processes and the official MCP SDK clients:
 *
 *  1. Two `waypoint mcp` processes released at the same instant race to own one
 *     store, several rounds over the same workspace: exactly one owns it, the other
 *     relays to it, both see the same data, and what is written through either lands
 *     in the store once.
 *  2. Many MCP clients (streamable HTTP sessions and stdio relays) hammer one
 *     `waypoint serve` owner with realistic calls — tasks started under idempotency
 *     keys (some shared, so starts contend), steps, and side effects begun on shared
 *     keys from every client at once. Afterwards, from the store alone: the event
 *     sequence is dense, every acknowledged call's events are there exactly once and
 *     nothing else is, no side effect was told `proceed` twice for one attempt or
 *     after it was done, and the projections equal a rebuild.
 *
 * Size: WAYPOINT_CONC_CLIENTS × WAYPOINT_CONC_CALLS (default 20 × 15 in `npm test`, still twenty clients at once;
 * `npm run test:concurrency` runs the full 20 × 500) and WAYPOINT_RACE_ROUNDS (3; the lock race runs 30 rounds of three processes).
 */

type Json = Record<string, any>;

const CLIENTS = Number(process.env.WAYPOINT_CONC_CLIENTS ?? 20);
const CALLS = Number(process.env.WAYPOINT_CONC_CALLS ?? 15);
const ROUNDS = Number(process.env.WAYPOINT_RACE_ROUNDS ?? 3);
/** Of the clients, this many talk through a `waypoint mcp` stdio relay rather than HTTP directly. */
const STDIO_CLIENTS = Math.min(4, Math.floor(CLIENTS / 5));

function structured(r: unknown, what: string): Json {
  const res = r as CallToolResult;
  if (res.isError) throw new Error(`${what}: tool error: ${JSON.stringify(res.content)}`);
  return res.structuredContent as Json;
}

interface RaceProc {
  client: Client;
  pid: number;
  stderr(): string;
  close(): Promise<void>;
}

/** Starts a contender; it loads and reports `ready`, then waits for the go file. */
function raceProc(script: string, workspace: string, goFile: string): { ready: Promise<void>; connected: Promise<RaceProc> } {
  const transport = new StdioClientTransport({ command: process.execPath, args: [script, workspace, goFile], stderr: 'pipe', cwd: workspace });
  let err = '';
  let onReady!: () => void;
  const ready = new Promise<void>((r) => (onReady = r));
  transport.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
    if (/^ready$/m.test(err)) onReady();
  });
  const client = new Client({ name: 'race', version: '1.0.0' });
  // initialize is answered only once the process has resolved the store (owns or relays).
  const connected = client.connect(transport).then(
    () => {
      const pid = transport.pid!;
      return {
        client,
        pid,
        stderr: () => err,
        close: async () => {
          await client.close().catch(() => undefined);
          await waitExit(pid);
        },
      };
    },
    (e: Error) => {
      throw new Error(`${e.message}; stderr: ${err}`);
    },
  );
  return { ready, connected };
}

describe('concurrency: processes racing for the owner lock', function () {
  this.timeout(120_000);
  const CONTENDERS = 3;
  const LOCK_ROUNDS = Number(process.env.WAYPOINT_LOCK_ROUNDS ?? 30);

  it(`${CONTENDERS} processes open the store at the same instant: never two owners at once, losers refused cleanly (${LOCK_ROUNDS} rounds)`, async () => {
    const script = bundleScript(path.join(__dirname, '..', 'support', 'lockRaceChild.ts'));
    const ws = tmpDir('wp-lockrace-');
    try {
      const dir = path.join(ws.dir, '.waypoint');
      const period = 400;
      const t0 = Date.now() + 2_000;
      const outs = await Promise.all(
        Array.from({ length: CONTENDERS }, () => {
          const child = spawn(process.execPath, [script, dir, String(t0), String(LOCK_ROUNDS), String(period)], { stdio: ['ignore', 'pipe', 'inherit'] });
          let out = '';
          child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
          return new Promise<string>((resolve) => child.once('exit', () => resolve(out)));
        }),
      );
      const lines = outs.flatMap((o, who) => o.trim().split('\n').map((l) => `${who} ${l}`));
      const errors = lines.filter((l) => / error /.test(l));
      assert.deepEqual(errors, [], 'a loser must be refused with "locked", never fail otherwise');
      // Holds, from the moment open returned to the moment close returned (which is after the
      // lock is released, so it over-covers the real hold): no two processes' holds overlap.
      const holds = lines.flatMap((l) => {
        const m = /^(\d+) won (\d+) ([\d.]+) ([\d.]+)$/.exec(l);
        return m ? [{ who: Number(m[1]), round: Number(m[2]), from: Number(m[3]), to: Number(m[4]) }] : [];
      });
      const overlaps = holds.flatMap((a) => holds.filter((b) => a.who < b.who && a.from < b.to && b.from < a.to).map((b) => ({ a, b })));
      assert.deepEqual(overlaps, [], 'two processes owned the store at the same time');
      assert.ok(holds.length >= LOCK_ROUNDS / 4, `only ${holds.length} of ${LOCK_ROUNDS} rounds had an owner: the race was not exercised`);
      assert.equal(lines.length, CONTENDERS * LOCK_ROUNDS, 'every contender reported every round');
      const winners = new Set(holds.map((h) => h.round));
      process.stdout.write(`      ${winners.size} of ${LOCK_ROUNDS} rounds owned, never by two at once; ${lines.filter((l) => / lost /.test(l)).length} clean refusals\n`);
    } finally {
      ws.cleanup();
    }
  });
});

describe('concurrency: two processes race to own one store', function () {
  this.timeout(60_000 + ROUNDS * 30_000);
  let ws: ReturnType<typeof tmpDir>;
  let script: string;
  let goDir: string;
  const procs: RaceProc[] = [];

  before(() => {
    script = bundleScript(path.join(__dirname, '..', 'support', 'raceChild.ts'));
    ws = tmpDir('wp-race-');
    fs.writeFileSync(path.join(ws.dir, 'README.md'), '# raced\n');
    goDir = fs.mkdtempSync(path.join(path.dirname(ws.dir), 'wp-race-go-'));
  });
  after(async () => {
    for (const p of procs.splice(0)) await p.close();
    ws.cleanup();
    fs.rmSync(goDir, { recursive: true, force: true });
  });

  it(`exactly one owns, the other relays; both see and write the same store (${ROUNDS} rounds)`, async () => {
    const storeDir = path.join(ws.dir, '.waypoint');
    const acked = new Map<string, string>(); // idempotency key → task id
    const outcomes: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Both processes load first, then both go at the same wall-clock instant.
      const goFile = path.join(goDir, `go-${round}`);
      const pa = raceProc(script, ws.dir, goFile);
      const pb = raceProc(script, ws.dir, goFile);
      await Promise.all([pa.ready, pb.ready]);
      fs.writeFileSync(goFile, String(Date.now() + 300));
      const [a, b] = await Promise.all([pa.connected, pb.connected]);
      procs.push(a, b);
      const goes = [a, b].map((p) => Number(/go (\d+)/.exec(p.stderr())?.[1]));
      const owners = [a, b].filter((p) => /owning the store/.test(p.stderr()));
      const relays = [a, b].filter((p) => /relaying to the owner/.test(p.stderr()));
      const ctx = `round ${round}; A: ${a.stderr()}\nB: ${b.stderr()}`;
      assert.equal(owners.length, 1, `exactly one owner, ${ctx}`);
      assert.equal(relays.length, 1, `the other relays, ${ctx}`);
      const [owner] = owners;
      const [relay] = relays;
      outcomes.push(`${owner === a ? 'A' : 'B'} owned (started ${Math.abs(goes[0] - goes[1])} ms apart)`);
      assert.equal(readLock(storeDir).info?.pid, owner.pid, 'the lock names the owner');
      assert.equal(readDiscovery(storeDir)?.pid, owner.pid, 'the discovery file names the owner');

      // Writes through either side, including the same idempotency key from both at once.
      const start = (p: RaceProc, key: string) => p.client.callTool({ name: 'waypoint_task_start', arguments: { goal: `race ${key}`, idempotencyKey: key } });
      const [ra, rb, sa, sb] = await Promise.all([start(a, `r${round}-A`), start(b, `r${round}-B`), start(a, `r${round}-shared`), start(b, `r${round}-shared`)]);
      acked.set(`r${round}-A`, structured(ra, 'A start').taskId);
      acked.set(`r${round}-B`, structured(rb, 'B start').taskId);
      const shared = structured(sa, 'A shared start').taskId;
      assert.equal(structured(sb, 'B shared start').taskId, shared, 'one idempotency key, one task, whichever side asked');
      acked.set(`r${round}-shared`, shared);
      // A step through the relay, read back through the owner.
      const step = structured(await relay.client.callTool({ name: 'waypoint_step_start', arguments: { taskId: shared, title: 'through the relay' } }), 'relay step');
      const seenByOwner = structured(await owner.client.callTool({ name: 'waypoint_task_status', arguments: { taskId: shared } }), 'owner status');
      assert.deepEqual(
        seenByOwner.steps.map((s: Json) => [s.id, s.status]),
        [[step.stepId, 'in_progress']],
      );
      const listA = structured(await a.client.callTool({ name: 'waypoint_task_status', arguments: {} }), 'A list').tasks.map((t: Json) => t.id).sort();
      const listB = structured(await b.client.callTool({ name: 'waypoint_task_status', arguments: {} }), 'B list').tasks.map((t: Json) => t.id).sort();
      assert.deepEqual(listA, listB, 'both sides see the same tasks');
      assert.deepEqual(listA, [...new Set(acked.values())].sort(), 'every task acknowledged so far, in every round, and nothing else');

      // The relay leaves first, then the owner; the next round races for a free store again.
      await relay.close();
      await owner.close();
      procs.splice(0);
      assert.equal(fs.existsSync(path.join(storeDir, 'owner.lock')), false, `the owner released the lock, ${ctx}`);
    }
    process.stdout.write(`      race rounds: ${outcomes.join('; ')}\n`);

    // From the store alone: each acknowledged start once, a dense sequence, projections = rebuild.
    const engine = await openEngine(ws.dir);
    try {
      const events = (await engine.events());
      events.forEach((e, i) => assert.equal(e.seq, i + 1, 'dense event sequence'));
      const started = events.filter((e) => e.type === 'task.started');
      assert.equal(started.length, acked.size, 'one task.started per acknowledged key, no more');
      for (const [key, taskId] of acked) assert.deepEqual(started.filter((e) => e.key === key).map((e) => e.taskId), [taskId], `key ${key}`);
      assert.equal(events.filter((e) => e.type === 'step.started').length, ROUNDS);
      const v = await engine.verify();
      assert.deepEqual(v.differences, []);
    } finally {
      await engine.close();
    }
  });
});

// ---------------------------------------------------------------------------

interface Ack {
  client: number;
  tool: string;
  args: Json;
  out: Json;
}

/** What one client does: its own tasks and steps, shared-key starts, and side effects on shared keys. */
async function clientWorkload(c: number, client: Client, calls: number, sharedTask: string, fxKeys: number, acks: Ack[], workDir: string): Promise<void> {
  let made = 0;
  const call = async (tool: string, args: Json): Promise<Json> => {
    made++;
    const out = structured(await client.callTool({ name: tool, arguments: args }), `client ${c} ${tool} ${JSON.stringify(args)}`);
    acks.push({ client: c, tool, args, out });
    return out;
  };
  let seed = c * 7919 + 1;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  let own = '';
  let n = 0;
  while (made < calls) {
    const left = calls - made;
    if (!own || (n % 6 === 0 && left >= 1)) {
      // A fresh task under the client's own key, or (every other time) under a key all clients share.
      const key = n % 12 === 0 ? `shared-start-${(n / 12) % 3}` : `c${c}-task-${n}`;
      const t = await call('waypoint_task_start', { goal: `client ${c} job ${n}`, idempotencyKey: key, agent: `client-${c}` });
      // A shared-key task belongs to whichever session started it first; this client works on its own.
      if (!key.startsWith('shared')) own = t.taskId;
      n++;
      continue;
    }
    const r = rand();
    if (r < 0.45 && left >= 2) {
      const s = await call('waypoint_step_start', { taskId: own, title: `step ${n}` });
      fs.writeFileSync(path.join(workDir, `c${c}.txt`), `client ${c} step ${n}\n`);
      await call('waypoint_step_complete', { taskId: own, stepId: s.stepId, summary: `did ${n}`, outputs: { n } });
    } else if (r < 0.9) {
      // Contend on a shared key: obey the decision as an agent must.
      const key = `fx:${Math.floor(rand() * fxKeys)}`;
      const d = await call('waypoint_side_effect_begin', { taskId: sharedTask, key, kind: 'http', description: `POST ${key}`, args: { client: c } });
      if (d.decision === 'proceed' && made < calls) {
        const ok = rand() < 0.8;
        await call('waypoint_side_effect_end', ok ? { taskId: sharedTask, key, ok, result: { by: c, attempt: d.attempt } } : { taskId: sharedTask, key, ok, error: `client ${c} failed` });
      } else if (d.decision === 'proceed') {
        // Out of calls with an effect in flight: settle it anyway so no intent is left in doubt.
        await call('waypoint_side_effect_end', { taskId: sharedTask, key, ok: true, result: { by: c, attempt: d.attempt } });
      }
    } else {
      await call('waypoint_task_status', { taskId: own });
    }
    n++;
  }
}

function count<T>(xs: T[], key: (x: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of xs) m.set(key(x), (m.get(key(x)) ?? 0) + 1);
  return m;
}

describe('concurrency: many MCP clients against one owner', function () {
  // Generous: the owner is fsync-bound (a checkpoint per step call), and a shared machine may be slow.
  this.timeout(120_000 + CLIENTS * CALLS * 300);
  let ws: ReturnType<typeof tmpDir>;
  let served: Served | undefined;
  const relays: StdioSession[] = [];
  const clients: Client[] = [];

  before(() => buildCli());
  beforeEach(() => {
    ws = tmpDir('wp-conc-');
    fs.mkdirSync(path.join(ws.dir, 'work'));
    fs.writeFileSync(path.join(ws.dir, 'README.md'), '# load\n');
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
    for (const r of relays.splice(0)) await r.close();
    await served?.stop();
    served = undefined;
    ws.cleanup();
  });

  it(`${CLIENTS} clients × ${CALLS} calls (${STDIO_CLIENTS} through stdio relays): no lost or duplicated event, no side effect run twice`, async () => {
    served = await serve(ws.dir);
    const all: Client[] = [];
    for (let i = 0; i < CLIENTS - STDIO_CLIENTS; i++) {
      const c = await httpClient(served.url, served.token);
      clients.push(c);
      all.push(c);
    }
    for (let i = 0; i < STDIO_CLIENTS; i++) {
      const r = await stdioSession(ws.dir);
      relays.push(r);
      all.push(r.client);
    }
    const acks: Ack[] = [];
    const shared = structured(await all[0].callTool({ name: 'waypoint_task_start', arguments: { goal: 'the shared deploy task', idempotencyKey: 'fx-task' } }), 'shared task');
    acks.push({ client: 0, tool: 'waypoint_task_start', args: { idempotencyKey: 'fx-task' }, out: shared });
    const fxKeys = Math.max(4, Math.round((CLIENTS * CALLS) / 100));
    const t0 = performance.now();
    await Promise.all(all.map((c, i) => clientWorkload(i, c, CALLS, shared.taskId, fxKeys, acks, path.join(ws.dir, 'work'))));
    const ms = performance.now() - t0;
    process.stdout.write(`      ${acks.length - 1} acknowledged calls from ${CLIENTS} clients in ${(ms / 1000).toFixed(1)} s (${((acks.length / ms) * 1000).toFixed(0)} calls/s)\n`);

    for (const c of clients.splice(0)) await c.close();
    for (const r of relays.splice(0)) await r.close();
    assert.equal(await served.stop(), 0, 'the owner stops cleanly');
    served = undefined;

    const engine = await openEngine(ws.dir);
    try {
      const events: WaypointEvent[] = (await engine.events());
      events.forEach((e, i) => assert.equal(e.seq, i + 1, 'dense event sequence'));
      const byType = (t: string) => events.filter((e) => e.type === t) as (WaypointEvent & { data: Json })[];
      const of = (tool: string) => acks.filter((a) => a.tool === tool);

      // Tasks: one task per idempotency key, whoever asked, and one task.started for it.
      const starts = of('waypoint_task_start');
      const taskByKey = new Map<string, string>();
      for (const s of starts) {
        const k = s.args.idempotencyKey as string;
        if (taskByKey.has(k)) assert.equal(s.out.taskId, taskByKey.get(k), `key ${k} answered with two different tasks`);
        taskByKey.set(k, s.out.taskId);
      }
      const started = byType('task.started');
      assert.equal(started.length, taskByKey.size, 'a task.started per distinct key, no more');
      for (const [k, id] of taskByKey) assert.deepEqual(started.filter((e) => e.taskId === id).map((e) => e.key), [k]);

      // Steps: each acknowledged start and completion exactly once.
      const stepStarts = of('waypoint_step_start');
      const stepDone = of('waypoint_step_complete');
      assert.equal(byType('step.started').length, stepStarts.length);
      assert.equal(byType('step.completed').length, stepDone.length);
      const startedSteps = count(byType('step.started'), (e) => `${e.taskId}/${e.data.stepId}/${e.data.attempt}`);
      for (const s of stepStarts) assert.equal(startedSteps.get(`${s.out.taskId}/${s.out.stepId}/${s.out.attempt}`), 1);
      const doneSteps = count(byType('step.completed'), (e) => `${e.taskId}/${e.data.stepId}`);
      for (const s of stepDone) assert.equal(doneSteps.get(`${s.out.taskId}/${s.out.stepId}`), 1);

      // Checkpoints: every acknowledged one once, and no unacknowledged one.
      const begins = of('waypoint_side_effect_begin');
      const proceeds = begins.filter((b) => b.out.decision === 'proceed');
      const ackedCheckpoints = [...started.map((e) => e.taskId), ...stepStarts.map((s) => s.out.checkpointId), ...stepDone.map((s) => s.out.checkpointId), ...proceeds.map((p) => p.out.checkpointId)];
      const checkpointEvents = count(byType('checkpoint.created'), (e) => e.data.checkpointId);
      assert.equal(byType('checkpoint.created').length, ackedCheckpoints.length, 'one checkpoint per task start, step start/complete and proceeded side effect');
      for (const s of [...stepStarts, ...stepDone, ...proceeds]) assert.equal(checkpointEvents.get(s.out.checkpointId), 1, `checkpoint ${s.out.checkpointId}`);

      // Side effects: at most one proceed per (key, attempt), none after done, each intent acknowledged.
      const proceedsPerAttempt = count(proceeds, (p) => `${p.args.key}#${p.out.attempt}`);
      for (const [k, n] of proceedsPerAttempt) assert.equal(n, 1, `side effect ${k} was told to proceed ${n} times`);
      const intents = byType('side_effect.intent');
      assert.equal(intents.length, proceeds.length, 'an intent per proceed, no more');
      const ends = of('waypoint_side_effect_end');
      assert.equal(byType('side_effect.done').length + byType('side_effect.failed').length, ends.length, 'an outcome per acknowledged end');
      const ledger = new Map<string, string[]>();
      for (const e of events.filter((x) => x.type.startsWith('side_effect.')) as (WaypointEvent & { data: Json })[]) {
        const k = e.data.key as string;
        ledger.set(k, [...(ledger.get(k) ?? []), e.type.slice('side_effect.'.length)]);
      }
      for (const [k, seq] of ledger) {
        // intent, failed, intent, failed, …, intent, done: never two intents in a row, nothing after done.
        const text = seq.join(' ');
        assert.match(text, /^(intent failed )*(intent( done| failed)?)$/, `side effect ${k}: ${text}`);
      }
      const decisions = count(begins, (b) => b.out.decision);
      process.stdout.write(
        `      ${events.length} events; ${taskByKey.size} tasks, ${stepStarts.length} steps, ${begins.length} side-effect begins on ${fxKeys} shared keys (${[...decisions].map(([d, n]) => `${d} ${n}`).join(', ')})\n`,
      );
      assert.ok((decisions.get('already_done') ?? 0) + (decisions.get('in_doubt') ?? 0) > 0, 'the shared keys were actually contended');

      const v = await engine.verify();
      assert.deepEqual(v.differences, [], 'projections equal a rebuild');
    } finally {
      await engine.close();
    }
  });
});
