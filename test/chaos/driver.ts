/**
 * The crash matrix: each phase runs a realistic workload in a child process and
 * SIGKILLs it at a point drawn from a seeded PRNG (after K acknowledged calls plus
 * D ms), then reopens the store in this process and checks the invariants
 * (checks.ts). The seed drives the kill plan and the workloads' choices, so a
 * failing seed replays the failure as far as process timing allows.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { bundleScript } from '../support/bundle';
import { tmpDir } from '../support/tmp';
import { checkAfterKill, newCheckState, type Ack, type CheckState } from './checks';
import { LiveWriter, type LiveTotals } from './liveCheck';
import { LIVE_DIR, LIVE_FILES } from './live';
import { mcpSession } from './mcpSession';
import type { ChildPhase, Phase } from './phases';
import { Prng } from './prng';
import type { Expectation } from './tree';

export interface KillPlan {
  /** Kill after this many acknowledged calls (and announced operations)… */
  afterAcks: number;
  /** …plus this many milliseconds. */
  delayMs: number;
  /** The workload's own seed. */
  workloadSeed: number;
}

/** How each phase's kills are spread: acks to wait for, extra delay, a fresh workspace every N kills. */
const PLAN_SHAPE: Record<Phase, { acks: number; delayMs: number; freshEvery: number }> = {
  events: { acks: 30, delayMs: 15, freshEvery: 20 },
  checkpoints: { acks: 6, delayMs: 60, freshEvery: 25 },
  rollbacks: { acks: 8, delayMs: 80, freshEvery: 25 },
  // An apply takes seconds on a loaded machine (checkpoint, writes, git): spread kills across all of it.
  review: { acks: 10, delayMs: 1500, freshEvery: 20 },
  mcp: { acks: 12, delayMs: 30, freshEvery: 25 },
  // acks/delay: when the first owner is stopped; the successor is killed after as many again.
  stall: { acks: 20, delayMs: 40, freshEvery: 20 },
  liveedits: { acks: 8, delayMs: 80, freshEvery: 25 },
};

/** The stall phase's lease: short, so a SIGSTOP outlasts it quickly. */
const STALL_LEASE_MS = 800;

export interface Violation {
  phase: Phase;
  /** 1-based, within the phase. */
  kill: number;
  message: string;
}

export interface PhaseSummary {
  phase: Phase;
  kills: number;
  acked: number;
  /** Kills that landed inside a rollback or review apply. */
  interruptedOps: number;
  /** Interrupted operations that open finished (and reported). */
  repaired: number;
  checks: number;
  violations: number;
  seconds: number;
}

export interface ChaosOptions {
  seed: number;
  phases: readonly Phase[];
  killsPerPhase: number;
  log?: (line: string) => void;
  /** Phases run side by side (default 1). */
  jobs?: number;
  /** Stop a phase at its first violation (default true: later kills build on a broken store). */
  stopPhaseOnViolation?: boolean;
}

export interface ChaosResult {
  seed: number;
  phases: PhaseSummary[];
  first: Violation | null;
}

/** Each phase has its own stream, so `--phase=X` with a seed replays X exactly as the full run did. */
export function phaseSeed(seed: number, phase: Phase): number {
  let h = seed >>> 0;
  for (const ch of phase) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h;
}

let workloadScript: string | undefined;
function workload(): string {
  workloadScript ??= bundleScript(path.join(__dirname, 'workloads.ts'));
  return workloadScript;
}

export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const log = o.log ?? (() => undefined);
  const phases = new Map<Phase, PhaseSummary>();
  const violations: Violation[] = [];
  const queue = [...o.phases];
  // Phases are independent (own workspace, own PRNG stream), so they may run side by side;
  // most of a kill's time is waiting on process start and fsync, not on the CPU.
  const lane = async () => {
    for (let phase = queue.shift(); phase; phase = queue.shift()) {
      const t0 = Date.now();
      const report = (v: Violation) => {
        violations.push(v);
        log(`VIOLATION in ${v.phase} at kill ${v.kill} (seed ${o.seed}): ${v.message}`);
      };
      const s = await runPhase(phase, o.seed, o.killsPerPhase, report, o.stopPhaseOnViolation ?? true, log);
      phases.set(phase, { ...s, seconds: (Date.now() - t0) / 1000 });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(o.jobs ?? 1, o.phases.length)) }, lane));
  // "First" in phase order, so the report does not depend on which lane finished first.
  const first = o.phases.map((p) => violations.filter((v) => v.phase === p).sort((a, b) => a.kill - b.kill)[0]).find(Boolean) ?? null;
  return { seed: o.seed, phases: o.phases.map((p) => phases.get(p)!), first };
}

async function runPhase(
  phase: Phase,
  seed: number,
  kills: number,
  report: (v: Violation) => void,
  stopOnViolation: boolean,
  log: (line: string) => void,
): Promise<Omit<PhaseSummary, 'seconds'>> {
  const rng = new Prng(phaseSeed(seed, phase));
  const shape = PLAN_SHAPE[phase];
  const sum = { phase, kills: 0, acked: 0, interruptedOps: 0, repaired: 0, checks: 0, violations: 0 };
  let ws: ReturnType<typeof tmpDir> | null = null;
  const sidecar = tmpDir(`wp-chaos-expect-`);
  let state: CheckState = newCheckState();
  // The liveedits phase: the person saving files in the current workspace, and their saves' fate summed over workspaces.
  let writer: LiveWriter | null = null;
  const live: LiveTotals = { saves: 0, replacedHeld: 0, kept: 0 };
  let liveNow: LiveTotals | null = null;
  const liveDone = () => {
    if (liveNow) for (const k of ['saves', 'replacedHeld', 'kept'] as const) live[k] += liveNow[k];
    liveNow = null;
  };
  try {
    for (let k = 0; k < kills; k++) {
      if (k % shape.freshEvery === 0) {
        await writer?.stop();
        liveDone();
        ws?.cleanup();
        ws = tmpDir(`wp-chaos-${phase}-`);
        setUpWorkspace(phase, ws.dir);
        state = newCheckState();
        if (phase === 'liveedits') writer = new LiveWriter(ws.dir, sidecar.dir, `k${k}`, rng.seed());
      }
      const plan: KillPlan = { afterAcks: rng.int(shape.acks), delayMs: rng.int(shape.delayMs), workloadSeed: rng.seed() };
      const acksBefore = state.acks.length;
      let run: RunOutcome;
      const tRun = Date.now();
      try {
        run =
          phase === 'mcp'
            ? await mcpSession(ws!.dir, plan, state.acks)
            : phase === 'stall'
              ? await runStall(ws!.dir, sidecar.dir, `k${k}`, plan, rng.seed(), state.acks)
              : await runWorkload(phase, ws!.dir, sidecar.dir, `k${k}`, plan, state.acks);
      } catch (e) {
        run = { open: null, failure: (e as Error).message };
      }
      sum.kills++;
      sum.acked += state.acks.length - acksBefore;
      const violations: string[] = run.failure ? [`the workload failed by itself: ${run.failure}`] : [];
      const tCheck = Date.now();
      const c = await checkAfterKill(ws!.dir, state, run.open, writer ?? undefined);
      if (c.live) liveNow = c.live;
      if (process.env.WAYPOINT_CHAOS_TIMING) log(`  [${phase}] kill ${k + 1}: run ${tCheck - tRun} ms (ready after ${run.readyMs ?? '?'} ms), check ${Date.now() - tCheck} ms`);
      sum.checks += c.checks;
      sum.repaired += c.repaired;
      if (run.open) sum.interruptedOps++;
      violations.push(...c.violations);
      if (violations.length) {
        sum.violations += violations.length;
        report({ phase, kill: k + 1, message: `${violations[0]}${violations.length > 1 ? ` (and ${violations.length - 1} more)` : ''}` });
        if (stopOnViolation) {
          log(`  [${phase}] stopping this phase at its first violation; workspace kept at ${ws!.dir}`);
          ws = null; // keep it for a look
          break;
        }
      }
      if ((k + 1) % 25 === 0) log(`  [${phase}] ${k + 1}/${kills} kills, ${sum.checks} checks, ${sum.violations} violations`);
    }
  } finally {
    await writer?.stop();
    liveDone();
    ws?.cleanup();
    sidecar.cleanup();
  }
  if (phase === 'liveedits') {
    log(`  [liveedits] ${live.saves} saves by a person while rollbacks ran: ${live.kept} kept as conflicts, ${live.replacedHeld} replaced after a checkpoint held them, ${sum.violations} lost`);
  }
  return sum;
}

/** Workspaces start the way each workload expects: the review phase needs a git repository with a commit. */
function setUpWorkspace(phase: Phase, dir: string): void {
  if (phase === 'liveedits') {
    fs.mkdirSync(path.join(dir, LIVE_DIR), { recursive: true });
    for (let i = 0; i < LIVE_FILES; i++) fs.writeFileSync(path.join(dir, LIVE_DIR, `f${i}.txt`), `${LIVE_DIR}/f${i}.txt as it began\n`);
  }
  if (phase === 'review' || phase === 'mcp') {
    for (let i = 0; i < 30; i++) {
      fs.mkdirSync(path.join(dir, 'src'), { recursive: true });
      fs.writeFileSync(path.join(dir, 'src', `m${i}.txt`), Array.from({ length: 40 + 40 * i }, (_, j) => `module ${i} line ${j}\n`).join(''));
    }
  }
  if (phase === 'review') {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, stdio: 'pipe' });
    git('init', '-q');
    git('config', 'user.email', 'chaos@example.invalid');
    git('config', 'user.name', 'Chaos');
    git('config', 'commit.gpgsign', 'false');
    git('add', '-A');
    git('commit', '-qm', 'base');
  }
}

export interface RunOutcome {
  /** The operation the kill interrupted, if one was announced and had not settled. */
  open: Expectation | null;
  /** Set when the victim ended by itself (a workload error is a finding too). */
  failure?: string;
  /** How long the victim took to be ready (for tuning). */
  readyMs?: number;
}

/**
 * Runs one workload child and SIGKILLs it per the plan. The child leads its own
 * process group: after the kill, the driver waits for the group to drain (a git
 * commit the child started runs to its end, as it would after an editor crash)
 * before anyone looks at the workspace.
 */
function runWorkload(phase: ChildPhase, workspace: string, sidecar: string, runId: string, plan: KillPlan, acks: Ack[]): Promise<RunOutcome> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [workload(), phase, workspace, String(plan.workloadSeed), sidecar, runId], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let buf = '';
    let stderr = '';
    let seen = 0;
    let timer: NodeJS.Timeout | undefined;
    let open: Expectation | null = null;
    const t0 = Date.now();
    let readyMs: number | undefined;
    const kill = () => {
      try {
        process.kill(child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    };
    const arm = () => (timer ??= setTimeout(kill, plan.delayMs));
    // A workload that stalls is killed anyway (and its checks still run).
    const stall = setTimeout(kill, 120_000);
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const [word, ...rest] = line.split(' ');
        if (word === 'ready') {
          readyMs = Date.now() - t0;
          if (plan.afterAcks === 0) arm();
          continue;
        }
        if (word === 'expect') open = JSON.parse(fs.readFileSync(rest.join(' '), 'utf8')) as Expectation;
        else if (word === 'settled') open = null;
        else if (word === 'ack') acks.push({ kind: rest[0] as Ack['kind'], taskId: rest[1]!, id: rest[2]! });
        else continue;
        if (word !== 'settled' && ++seen >= plan.afterAcks) arm();
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', async (code, signal) => {
      clearTimeout(timer);
      clearTimeout(stall);
      await drainGroup(child.pid!);
      resolve(signal === 'SIGKILL' ? { open, readyMs } : { open, readyMs, failure: `exit code ${code}: ${stderr.trim().split('\n').slice(0, 6).join(' | ')}` });
    });
  });
}

/**
 * The stall phase: an owner is SIGSTOPped (after K acks + D ms) and stays stopped
 * past its lease; a successor takes the store over and works; the first owner is
 * SIGCONTed while the successor writes, then both are SIGKILLed. Every call
 * either owner acknowledged must be in the store (the woken owner's calls are
 * refused with lost_ownership; an ack it prints on waking was acknowledged before
 * the takeover), and the store's projections must equal a rebuild.
 */
async function runStall(workspace: string, sidecar: string, runId: string, plan: KillPlan, successorSeed: number, acks: Ack[]): Promise<RunOutcome> {
  const env = { ...process.env, WAYPOINT_CHAOS_LEASE_MS: String(STALL_LEASE_MS) };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const first = spawnVictim(['events', workspace, String(plan.workloadSeed), sidecar, `${runId}a`], env, acks);
  const victims = [first];
  const failure = (why: string) => Promise.all(victims.map((v) => v.kill())).then(() => ({ open: null, failure: why }));
  if (!(await first.acked(plan.afterAcks, 60_000))) return failure(`the first owner did not reach ${plan.afterAcks} acks: ${first.stderr()}`);
  await sleep(plan.delayMs);
  first.signal('SIGSTOP');
  // Past the lease (and a renewal interval of slack), the successor may take over.
  await sleep(STALL_LEASE_MS + 400);
  const successor = spawnVictim(['events', workspace, String(successorSeed), sidecar, `${runId}b`], env, acks);
  victims.push(successor);
  if (!(await successor.acked(1 + (plan.afterAcks % 7), 60_000))) return failure(`the successor did not take over: ${successor.stderr()}`);
  first.signal('SIGCONT');
  await sleep(100 + plan.delayMs * 3);
  await Promise.all([first.kill(), successor.kill()]);
  // An ack printed after the wake may be one whose fence check passed just before the stop
  // (acknowledged while it still owned the store): like every ack, the checks require it present.
  return { open: null };
}

interface Victim {
  acked(n: number, ms: number): Promise<boolean>;
  ackCount(): number;
  signal(sig: NodeJS.Signals): void;
  kill(): Promise<void>;
  stderr(): string;
}

/** A workload child whose `ack` lines are recorded as they arrive; killed with its process group. */
function spawnVictim(args: string[], env: NodeJS.ProcessEnv, acks: Ack[]): Victim {
  const child = spawn(process.execPath, [workload(), ...args], { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env });
  let buf = '';
  let err = '';
  let count = 0;
  let exited = false;
  const exit = new Promise<void>((resolve) => child.on('exit', () => ((exited = true), resolve())));
  child.stdout.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const [word, ...rest] = buf.slice(0, nl).split(' ');
      buf = buf.slice(nl + 1);
      if (word === 'ack') {
        acks.push({ kind: rest[0] as Ack['kind'], taskId: rest[1]!, id: rest[2]! });
        count++;
      }
    }
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return {
    async acked(n, ms) {
      const deadline = Date.now() + ms;
      while (count < n && !exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      return count >= n;
    },
    ackCount: () => count,
    signal(sig) {
      try {
        process.kill(child.pid!, sig);
      } catch {
        /* gone */
      }
    },
    async kill() {
      try {
        process.kill(-child.pid!, 'SIGCONT');
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
      await exit;
      await drainGroup(child.pid!);
    },
    stderr: () => err.trim().split('\n').slice(0, 6).join(' | '),
  };
}

/** Waits until no process of the group is left (SIGKILLs stragglers after 30 s). */
async function drainGroup(pgid: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        return;
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
