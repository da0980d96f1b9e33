/**
 * The longest stretch an owner's main thread goes without its event loop turning,
 * during the engine's long operations on a big workspace. The owner lease is renewed
 * only while the loop turns (the renewal thread renews up to the loop's last turn), so
 * every stretch here must stay well inside the lease (30 s by default).
 *
 *   node --import tsx test/bench/loopStall.bench.ts [--files=N] [--big=N]
 *
 * A 5 ms interval timer on the main thread records the largest gap between its turns
 * while each operation runs: a first checkpoint of the whole tree, a checkpoint after
 * half the files changed, a rollback to the base, its undo, verify and the close (which
 * exports the database).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Engine } from '../../src/core/engine/engine';

const arg = (name: string, dflt: number): number => {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  return a ? Number(a.slice(name.length + 3)) : dflt;
};

async function main(): Promise<void> {
  const files = arg('files', 10_000);
  const big = arg('big', 8);
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-loopstall-'));
  try {
    for (let i = 0; i < files; i++) {
      const d = path.join(ws, `d${i % 100}`);
      if (i < 100) fs.mkdirSync(d, { recursive: true });
      fs.writeFileSync(path.join(d, `f${i}.ts`), `export const v${i} = ${i};\n`.repeat(80 + (i % 50)));
    }
    for (let i = 0; i < big; i++) fs.writeFileSync(path.join(ws, `big${i}.bin`), Buffer.alloc(4 * 1024 * 1024, i + 1));

    let last = performance.now();
    let maxGap = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 5);
    const rows: { op: string; ms: number; maxGapMs: number }[] = [];
    const measure = async <T>(op: string, fn: () => Promise<T>): Promise<T> => {
      await new Promise((r) => setTimeout(r, 20));
      last = performance.now();
      maxGap = 0;
      const t0 = performance.now();
      const out = await fn();
      rows.push({ op, ms: performance.now() - t0, maxGapMs: Math.max(maxGap, performance.now() - last) });
      return out;
    };

    const engine = await measure('open', () => Engine.open({ workspace: ws }));
    const t = await measure(`first checkpoint (${files} files + ${big} × 4 MB)`, () => engine.startTask({ goal: 'loop stall bench' }));
    for (let i = 0; i < files; i += 2) fs.appendFileSync(path.join(ws, `d${i % 100}`, `f${i}.ts`), '// changed\n');
    await measure(`checkpoint after ${files / 2} changed`, () => engine.checkpoint({ taskId: t.taskId }));
    await measure('rollback to base', () => engine.rollback({ taskId: t.taskId, checkpointId: t.baseCheckpointId }));
    await measure('undo rollback', () => engine.undoRollback({ taskId: t.taskId }));
    await measure('verify', () => engine.verify({}));
    await measure('close (export)', () => engine.close());
    clearInterval(timer);

    process.stdout.write(`\n| operation | ms | longest main-thread stall (ms) |\n| --- | ---: | ---: |\n`);
    for (const r of rows) process.stdout.write(`| ${r.op} | ${r.ms.toFixed(0)} | ${r.maxGapMs.toFixed(0)} |\n`);
  } finally {
    fs.rmSync(ws, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
