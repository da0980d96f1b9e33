/**
 * What uploading checkpoints' objects to the team store costs the checkpoint
 * (`npm run bench -- --only=pg-upload`; needs PostgreSQL, starts a throwaway cluster).
 *
 * Two workspaces of the same shape on one team store, one with the object upload and
 * one without, in the same run: phases of back-to-back checkpoints (each after 10 of
 * the workspace's files changed) alternate between them, so an upload still running
 * from the previous checkpoint competes with the next one, as it would for an agent
 * checkpointing every step. Reported: the checkpoint's acknowledgement (median, p95)
 * in each mode and their ratio, and how long after the acknowledgement the checkpoint's
 * objects are in the store (upload lag).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';
import { openPostgresBackend } from '../../src/core/store/postgres/backend';
import { PgCluster } from '../support/pgCluster';
import { benchDir, fmtMs, median, percentile, printTable } from './util';

const FILES = 2000;
const CHANGED = 10;

function fill(dir: string): void {
  for (let i = 0; i < FILES; i++) {
    const sub = path.join(dir, `pkg${i % 20}`);
    fs.mkdirSync(sub, { recursive: true });
    fs.writeFileSync(path.join(sub, `f${i}.ts`), `// file ${i}\n${'export const value = 1;\n'.repeat(150)}`);
  }
}

function touch(dir: string, round: number): string[] {
  const out: string[] = [];
  for (let k = 0; k < CHANGED; k++) {
    const i = (round * CHANGED + k) % FILES;
    const rel = `pkg${i % 20}/f${i}.ts`;
    fs.appendFileSync(path.join(dir, rel), `export const r${round} = ${round};\n`);
    out.push(rel);
  }
  return out;
}

export async function main(o: { quick?: boolean } = {}): Promise<void> {
  const phases = o.quick ? 2 : 6;
  const perPhase = o.quick ? 4 : 10;
  const cluster = await PgCluster.create();
  const dirs = [benchDir('wp-bench-up-on-'), benchDir('wp-bench-up-off-')];
  try {
    const open = async (dir: string, uploadObjects: boolean) => {
      fill(dir);
      const backend = await openPostgresBackend({ url: cluster.url(), storeDir: path.join(dir, '.waypoint'), workspacePath: dir, uploadObjects });
      return Engine.open({ workspace: dir, backend });
    };
    const on = await open(dirs[0]!.dir, true);
    const off = await open(dirs[1]!.dir, false);
    try {
      const tOn = (await on.startTask({ goal: 'bench with upload' })).taskId;
      const tOff = (await off.startTask({ goal: 'bench without upload' })).taskId;
      // The first (full) upload of the workspace is not what is measured.
      const t0 = performance.now();
      await on.objectUpload!.idle();
      const firstUpload = performance.now() - t0;
      const acks = { on: [] as number[], off: [] as number[] };
      const lags: number[] = [];
      let round = 0;
      for (let p = 0; p < phases; p++) {
        for (const mode of p % 2 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
          const e = mode === 'on' ? on : off;
          const dir = mode === 'on' ? dirs[0]!.dir : dirs[1]!.dir;
          const taskId = mode === 'on' ? tOn : tOff;
          for (let i = 0; i < perPhase; i++) {
            const dirty = touch(dir, round++);
            const s = performance.now();
            await e.checkpoint({ taskId, dirty });
            acks[mode].push(performance.now() - s);
          }
          if (mode === 'on') await on.objectUpload!.idle();
        }
      }
      // Upload lag of one checkpoint alone: acknowledged → its objects committed in the store.
      for (let i = 0; i < (o.quick ? 3 : 10); i++) {
        const dirty = touch(dirs[0]!.dir, round++);
        await on.checkpoint({ taskId: tOn, dirty });
        const s = performance.now();
        await on.objectUpload!.idle();
        lags.push(performance.now() - s);
      }
      const ackRatio = median(acks.on) / median(acks.off);
      printTable(`Checkpoint acknowledgement with the object upload vs without (${FILES} files, ${CHANGED} changed per checkpoint, ${acks.on.length} checkpoints each)`, [
        { measure: 'ack, median', waypoint: fmtMs(median(acks.on)), baseline: fmtMs(median(acks.off)), ratio: `${ackRatio.toFixed(2)}×`, target: '≤ 1.2×', ok: ackRatio <= 1.2 },
        { measure: 'ack, p95', waypoint: fmtMs(percentile(acks.on, 95)), baseline: fmtMs(percentile(acks.off, 95)), ratio: `${(percentile(acks.on, 95) / percentile(acks.off, 95)).toFixed(2)}×`, target: '', ok: null },
        { measure: 'upload lag after the ack, median', waypoint: fmtMs(median(lags)), baseline: '', ratio: '', target: '', ok: null },
        { measure: `first upload of the workspace (${FILES} files)`, waypoint: fmtMs(firstUpload), baseline: '', ratio: '', target: '', ok: null },
      ]);
    } finally {
      await on.close();
      await off.close();
    }
  } finally {
    for (const d of dirs) d.cleanup();
    cluster.remove();
  }
}
