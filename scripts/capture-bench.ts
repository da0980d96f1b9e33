// A terminal command's two checkpoints (command_start + command_end) on a 10,000-file tree with
// 10 files changed, with the watcher's dirty set against a full rescan (docs/capture.md).
//   node --import tsx scripts/capture-bench.ts
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Engine } from '../src/core/engine/engine';
async function main() {
  const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-cmdbench-'));
  for (let d = 0; d < 100; d++) { fs.mkdirSync(path.join(ws, `d${d}`)); for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(ws, `d${d}`, `f${f}.txt`), `x${d}-${f}\n`); }
  const e = await Engine.open({ workspace: ws });
  const { taskId } = await e.startTask({ goal: 'bench' });
  const run = async (i: number, hint: boolean) => {
    const t0 = performance.now();
    await e.beginCommand({ taskId, commandId: `c${i}`, commandLine: 'x', terminal: 'bash', ...(hint ? { dirty: [] } : {}) });
    const changed = Array.from({ length: 10 }, (_, k) => path.join(ws, `d${k}`, `f${i % 100}.txt`));
    for (const p of changed) fs.writeFileSync(p, `changed ${i}\n`);
    const r = await e.endCommand({ taskId, commandId: `c${i}`, exitCode: 0, ...(hint ? { dirty: changed } : {}) });
    if (r.filesTotal !== 10) throw new Error(`expected 10, got ${r.filesTotal}`);
    return performance.now() - t0;
  };
  const med = (a: number[]) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  const hinted: number[] = []; const full: number[] = [];
  for (let i = 0; i < 15; i++) { full.push(await run(i * 2, false)); hinted.push(await run(i * 2 + 1, true)); }
  console.log(`10,000 files, 10 changed per command, median of 15: with the watcher's dirty set ${med(hinted).toFixed(1)} ms, full rescan ${med(full).toFixed(1)} ms (start+end)`);
  await e.close(); fs.rmSync(ws, { recursive: true, force: true });
}
void main();
