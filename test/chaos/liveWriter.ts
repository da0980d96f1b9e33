/**
 * The person of the chaos matrix's liveedits phase: a process of its own that keeps
 * saving files under `live/` while the workload rolls back and undoes (and while
 * the driver's open finishes an interrupted rollback). Every save goes to the log,
 * one line each, appended synchronously after the save completed:
 *   wrote <path> <sha256>       the writer saved this content
 *   displaced <path> <sha256>   its last save of the path was replaced by someone else
 *                               (seen when it next comes to save the path)
 * Half the saves rewrite the file in place, half write a temp outside the workspace
 * and rename it over the file (as editors' atomic saves do); now and then a new file.
 * `<control>/pause` makes it stop between saves and answer with `<control>/paused`.
 * Usage: liveWriter <workspace> <log> <control dir> <seed>
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import { LIVE_DIR, LIVE_FILES } from './live';
import { Prng } from './prng';

const hash = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function contentHash(abs: string): string {
  try {
    return hash(fs.readFileSync(abs));
  } catch {
    return 'absent';
  }
}

async function main(): Promise<void> {
  const [workspace, log, control, seedArg] = process.argv.slice(2) as [string, string, string, string];
  const rng = new Prng(Number(seedArg));
  const last = new Map<string, string>();
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const pause = path.join(control, 'pause');
  const paused = path.join(control, 'paused');
  fs.mkdirSync(path.join(workspace, LIVE_DIR), { recursive: true });
  for (let n = 0; ; n++) {
    if (fs.existsSync(pause)) {
      fs.writeFileSync(paused, '');
      while (fs.existsSync(pause)) await sleep(5);
      fs.rmSync(paused, { force: true });
    }
    const rel = rng.chance(0.08) ? `${LIVE_DIR}/new-${process.pid}-${n}.txt` : `${LIVE_DIR}/f${rng.int(LIVE_FILES)}.txt`;
    const abs = path.join(workspace, rel);
    const before = last.get(rel);
    if (before !== undefined && contentHash(abs) !== before) fs.appendFileSync(log, `displaced ${rel} ${before}\n`);
    const bytes = Buffer.from(`${rel} save ${n} ${rng.int(1e9)}\n`.repeat(1 + rng.int(40)));
    try {
      if (rng.chance(0.5)) fs.writeFileSync(abs, bytes);
      else {
        const tmp = path.join(control, `save-${n}`);
        fs.writeFileSync(tmp, bytes);
        fs.renameSync(tmp, abs);
      }
    } catch {
      // Its directory was removed by a rollback for a moment: the save did not happen.
      fs.mkdirSync(path.join(workspace, LIVE_DIR), { recursive: true });
      continue;
    }
    const h = hash(bytes);
    last.set(rel, h);
    fs.appendFileSync(log, `wrote ${rel} ${h}\n`);
    await sleep(rng.int(6));
  }
}

main().catch((e) => {
  process.stderr.write(`live writer failed: ${(e as Error).stack}\n`);
  process.exit(3);
});
