/**
 * The fleet soak's workspace process (test/soak/fleet.ts): the one writer of a workspace
 * folder on the team store (as the editor or `waypoint serve` is: one owner per folder),
 * driving that workspace's share of the fleet's agents side by side, each under its own
 * lease owner id. Its machine is WAYPOINT_MACHINE (set by the parent: three names on one
 * host stand for three machines).
 *
 *   node --import tsx fleetAgentChild.ts '<json config>'
 *
 * Each agent loops: start a task (a short lease) with a plan of steps; per step, start it,
 * renew the lease a few times, complete it; ask for review; the next task. On opening, the
 * workspace's interrupted (or still active) tasks — a killed process's — are first resumed
 * by this process's agents and finished: the task is taken over here, under another
 * machine name than the one it started on.
 *
 * Every call the engine ANSWERED is written, after it resolved, as one JSON line to the
 * ack file (appendFileSync: a SIGKILL loses nothing written, and nothing unanswered is
 * ever written) with the idempotency key it gave the call (the event's `key` in the team
 * store, or the prefix of the keys of the events it wrote) and the call's latency. A call
 * the store could not take (the engine gave up retrying, the writer was fenced) ends the
 * process with exit code 75, the parent opens the workspace again in a new one; a call
 * the engine refused (a state the task is not in) is written as refused, not acked.
 */
import * as fs from 'node:fs';
import { Engine } from '../../src/core/engine';
import { WaypointError, errorMessage } from '../../src/core/model/errors';
import { ACTIVE_TASK_STATES } from '../../src/core/model/stateMachine';

export interface FleetAgentConfig {
  url: string;
  workspace: string;
  /** This process's agents (lease owner ids, unique across the fleet and its replacements). */
  agents: string[];
  ackFile: string;
  leaseMs: number;
  /** Steps per task, and heartbeats per step. */
  steps: number;
  beats: number;
  /** Pause between an agent's calls, ms (uniform in [min, max]). */
  pauseMs: [number, number];
  seed: number;
}

/** Codes that mean the store could not take the call (not a refusal): this process reopens. */
const STORE_GONE = new Set(['store_unavailable', 'io', 'lost_ownership', 'corrupt']);

const cfg = JSON.parse(process.argv[2]) as FleetAgentConfig;
let stopping = false;
process.on('SIGTERM', () => {
  stopping = true;
});

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

interface AckLine {
  agent: string;
  op: 'start' | 'step.start' | 'step.complete' | 'hb' | 'resume' | 'review' | 'refused';
  task: string;
  /** The idempotency key the call carried (absent for heartbeats, which take none). */
  key?: string;
  ms: number;
  at: number;
  why?: string;
}

function write(line: AckLine): void {
  fs.appendFileSync(cfg.ackFile, JSON.stringify(line) + '\n');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

class Refused extends Error {}

async function main(): Promise<void> {
  const engine = await openEngine();
  // What a killed predecessor left: taken over by this process's agents first.
  const leftover = engine.tasks({ states: ['interrupted', ...ACTIVE_TASK_STATES] }).map((t) => t.id);
  process.stdout.write(`ready ${JSON.stringify({ leftover })}\n`);
  const runs = cfg.agents.map((id, i) => agent(engine, id, rng(cfg.seed * 7919 + i), leftover));
  const results = await Promise.allSettled(runs);
  const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
  if (failed) throw failed.reason;
  await engine.close();
  process.stdout.write('closed\n');
}

async function openEngine(): Promise<Engine> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      return await Engine.open({ workspace: cfg.workspace, teamStore: cfg.url, snapshots: false, store: { lock: { waitMs: 15_000 } } });
    } catch (e) {
      // The server restarting or the wire cut while opening: open again.
      if (Date.now() > deadline || !(e instanceof WaypointError && STORE_GONE.has(e.code))) throw e;
      process.stderr.write(`open failed, retrying: ${errorMessage(e)}\n`);
      await sleep(500);
    }
  }
}

async function agent(engine: Engine, id: string, random: () => number, leftover: string[]): Promise<void> {
  const owner = { id };
  const pause = () => sleep(cfg.pauseMs[0] + random() * (cfg.pauseMs[1] - cfg.pauseMs[0]));
  /** One engine call: timed, written to the ack file once answered; a refusal is written as such and thrown as Refused. */
  const call = async <T>(op: AckLine['op'], task: string | ((r: T) => string), key: string | undefined, f: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    let r: T;
    try {
      r = await f();
    } catch (e) {
      if (e instanceof WaypointError && !STORE_GONE.has(e.code)) {
        write({ agent: id, op: 'refused', task: typeof task === 'string' ? task : '', key, ms: performance.now() - t0, at: Date.now(), why: `${op}: ${e.code}: ${e.message}` });
        throw new Refused(e.message);
      }
      throw e;
    }
    write({ agent: id, op, task: typeof task === 'string' ? task : task(r), key, ms: performance.now() - t0, at: Date.now() });
    return r;
  };
  const beats = async (taskId: string) => {
    for (let b = 0; b < cfg.beats && !stopping; b++) {
      await pause();
      await call('hb', taskId, undefined, () => engine.heartbeat({ taskId, owner }));
    }
  };
  /** A step: started (unless it already is), its lease renewed a few times, completed. Keys name the agent, so a taker-over's calls are its own. */
  const steps = async (taskId: string, stepId: string, started: boolean) => {
    const k = `${id}:${taskId}:${stepId}`;
    if (!started) {
      await pause();
      await call('step.start', taskId, `${k}:start`, () => engine.startStep({ taskId, stepId, owner, idempotencyKey: `${k}:start` }));
    }
    await beats(taskId);
    if (stopping) return;
    await pause();
    await call('step.complete', taskId, `${k}:done`, () => engine.completeStep({ taskId, stepId, owner, summary: `done ${stepId}`, idempotencyKey: `${k}:done` }));
  };
  for (let n = 0; !stopping; n++) {
    try {
      const resume = leftover.shift();
      if (resume) {
        const key = `${id}:resume:${resume}`;
        const ctx = await call('resume', resume, key, () => engine.resumeTask({ taskId: resume, owner, leaseTtlMs: cfg.leaseMs, idempotencyKey: key }));
        // Its plan finished here: the step it was in when it stopped completed, the ones not begun run; then the review.
        for (const step of ctx.plan) {
          if (stopping || !['pending', 'in_progress'].includes(step.status)) continue;
          await steps(resume, step.id, step.status === 'in_progress');
        }
        if (!stopping) await call('review', resume, `${id}:${resume}:review`, () => engine.requestReview({ taskId: resume, owner, summary: 'taken over and finished', idempotencyKey: `${id}:${resume}:review` }));
        continue;
      }
      await pause();
      const plan = Array.from({ length: cfg.steps }, (_, s) => ({ id: `s${s + 1}`, title: `Step ${s + 1}` }));
      const startKey = `${id}:start:${n}`;
      const { taskId } = await call('start', (r) => r.taskId, startKey, () =>
        engine.startTask({ goal: `fleet soak task ${n} of ${id}`, title: `${id} #${n}`, agent: 'fleet-soak', plan, leaseTtlMs: cfg.leaseMs, owner, idempotencyKey: startKey }),
      );
      for (const step of plan) {
        if (stopping) break;
        await steps(taskId, step.id, false);
      }
      if (!stopping) await call('review', taskId, `${id}:${taskId}:review`, () => engine.requestReview({ taskId, owner, summary: 'all steps done', idempotencyKey: `${id}:${taskId}:review` }));
    } catch (e) {
      if (e instanceof Refused) continue;
      throw e;
    }
  }
}

main().catch((e) => {
  const gone = e instanceof WaypointError && STORE_GONE.has(e.code);
  process.stderr.write(`${gone ? 'store gone' : 'agent failed'}: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(gone ? 75 : 3);
});
