import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Engine, type EngineOptions } from '../../src/core/engine/engine';
import type { NewEvent } from '../../src/core/store/eventStore';

/** A fresh temporary directory, removed by the returned cleanup. */
export function tmpDir(prefix = 'wp-test-'): { dir: string; cleanup: () => void } {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)));
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/** A controllable clock for lease tests. */
export class FakeClock {
  constructor(public t = Date.UTC(2026, 10, 30, 12, 0, 0)) {}
  now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

export async function openEngine(workspace: string, opts: Partial<EngineOptions> & { clock?: FakeClock } = {}): Promise<Engine> {
  const { clock, ...rest } = opts;
  return Engine.open({ workspace, ...rest, store: { ...(rest.store ?? {}), ...(clock ? { clock: clock.now } : {}), lock: { waitMs: 200, ...(rest.store?.lock ?? {}) } } });
}

export const PLAN4 = [
  { id: 'a', title: 'Read the code' },
  { id: 'b', title: 'Change it', dependsOn: ['a'] },
  { id: 'c', title: 'Test it', dependsOn: ['b'] },
  { id: 'd', title: 'Document it', dependsOn: ['a'] },
];

/** A `task.started` event for store-level tests: task `t<i>`, key `k<i>`. */
export function started(i: number): NewEvent {
  return {
    type: 'task.started',
    taskId: `t${i}`,
    corr: `c${i}`,
    key: `k${i}`,
    by: 'test',
    op: 'task.start',
    result: { taskId: `t${i}` },
    data: { goal: `goal ${i}`, title: `task ${i}`, agent: null, plan: [{ id: 'a', title: 'A' }], owner: { id: 'test' }, leaseTtlMs: 60_000 },
  };
}
