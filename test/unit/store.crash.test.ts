import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { Engine } from '../../src/core/engine/engine';
import { bundleScript } from '../support/bundle';
import { tmpDir } from '../support/tmp';

/**
 * Crash tests: a child process drives the engine and prints every acknowledged
 * call; it is SIGKILLed at a random moment — mid-append, mid-fdatasync, mid-export,
 * mid-rotation. After each kill the store must open, hold every acknowledged event,
 * equal a rebuild of its projections, and leave no temp files behind.
 *
 * WAYPOINT_CRASH_KILLS sets the number of kills (default 220 here; `npm run stress`
 * runs 2,000). The seed-free randomness is in the kill timing; a failure prints
 * the kill number and the last acknowledged lines.
 */
const KILLS = Number(process.env.WAYPOINT_CRASH_KILLS ?? 220);

interface Acks {
  tasks: Map<string, string>; // key → taskId
  keys: Set<string>; // idempotency keys of acknowledged calls
  effects: { taskId: string; key: string }[];
  lines: string[];
}

/**
 * Kills the child after a random number of acknowledged calls plus a random few
 * milliseconds, so kills land mid-work however loaded the machine is.
 */
function runChild(script: string, workspace: string, runId: string, killAfterAcks: number, acks: Acks): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, workspace, runId, String(4096 + Math.floor(Math.random() * 32768))], { stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    let stderr = '';
    let timer: NodeJS.Timeout | undefined;
    let seen = 0;
    const arm = () => {
      timer ??= setTimeout(() => child.kill('SIGKILL'), Math.floor(Math.random() * 15));
    };
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line === 'ready') {
          if (killAfterAcks === 0) arm();
          continue;
        }
        if (++seen >= killAfterAcks) arm();
        const [, kind, taskId, key] = line.split(' ');
        acks.lines.push(line);
        if (kind === 'task') {
          acks.tasks.set(key, taskId);
          acks.keys.add(key);
        } else if (kind === 'step') acks.keys.add(key);
        else if (kind === 'effect') acks.effects.push({ taskId, key });
      }
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve();
      else reject(new Error(`child exited by itself (code ${code}): ${stderr}`));
    });
  });
}

describe('crash safety (SIGKILL during appends, exports and rotations)', function () {
  this.timeout(0);
  let script: string;
  let ws: ReturnType<typeof tmpDir>;
  before(() => {
    script = bundleScript(path.join(__dirname, '..', 'support', 'crashChild.ts'));
  });
  beforeEach(() => (ws = tmpDir('wp-crash-')));
  afterEach(() => ws.cleanup());

  it(`keeps every acknowledged event across ${KILLS} random kills`, async () => {
    const acks: Acks = { tasks: new Map(), keys: new Set(), effects: [], lines: [] };
    let checks = 0;
    for (let k = 0; k < KILLS; k++) {
      await runChild(script, ws.dir, `r${k}`, Math.floor(Math.random() * 30), acks);
      const engine = await Engine.open({ workspace: ws.dir, store: { lock: { waitMs: 5_000 } } });
      try {
        const ctx = `after kill ${k + 1}; last acks: ${acks.lines.slice(-3).join(' | ')}`;
        for (const key of acks.keys) {
          assert.ok(engine.queries.idempotent(key), `acknowledged call ${key} is missing ${ctx}`);
          checks++;
        }
        for (const [key, taskId] of acks.tasks) {
          assert.ok(engine.queries.findTask(taskId), `acknowledged task ${taskId} (${key}) is missing ${ctx}`);
          checks++;
        }
        for (const e of acks.effects) {
          assert.ok(engine.queries.sideEffect(e.taskId, e.key), `acknowledged side-effect intent ${e.key} is missing ${ctx}`);
          checks++;
        }
        const v = await engine.verify();
        assert.deepEqual(v.differences, [], `projections differ from a rebuild ${ctx}`);
        const leftovers = fs.readdirSync(path.join(ws.dir, '.waypoint')).filter((n) => n.includes('.wp-tmp-'));
        assert.deepEqual(leftovers, [], `temp files left ${ctx}`);
        checks += 2;
      } finally {
        await engine.close();
      }
    }
    assert.ok(acks.keys.size > KILLS, `the workload acknowledged too little to prove anything (${acks.keys.size} calls)`);
    process.stdout.write(`      ${KILLS} kills, ${acks.keys.size} acknowledged calls, ${checks} invariant checks, 0 violations\n`);
  });
});
