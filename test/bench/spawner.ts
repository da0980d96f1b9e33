/**
 * Runs the benchmark's commands (git, sync) from a small helper process, so the
 * benchmark process itself never forks between measurements.
 *
 * Why: Node spawns by fork + exec. A fork write-protects every page of the parent's
 * heap, and afterwards the parent takes a copy-on-write fault on the first write to
 * each page. Waypoint's side runs in the benchmark process, so whatever it measured
 * right after a spawn paid for those faults: 100 blob decodes took 2–3 ms, or
 * 8–15 ms right after an `execFileSync('true')`; a full rescan ~85 ms, or ~100 ms
 * right after a `sync`. Git's side ran in a fresh process each time, and its figure
 * included forking the whole benchmark process (its page tables). From the helper,
 * git's time is taken around the command in a process of a few MB, and the
 * benchmark process pays for one fork, at start.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

const HELPER = `
const { execFileSync } = require('node:child_process');
const rl = require('node:readline').createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const { id, file, args } = JSON.parse(line);
  const t = performance.now();
  let reply;
  try {
    const out = execFileSync(file, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 }).toString();
    reply = { id, ms: performance.now() - t, out };
  } catch (err) {
    reply = { id, error: String(err.message), stderr: String(err.stderr ?? '') };
  }
  process.stdout.write(JSON.stringify(reply) + '\\n');
});
`;

interface Reply {
  id: number;
  ms?: number;
  out?: string;
  error?: string;
  stderr?: string;
}

export class Spawner {
  private readonly child: ChildProcessWithoutNullStreams;
  private readonly waiting = new Map<number, { resolve: (r: { ms: number; out: string }) => void; reject: (e: Error) => void }>();
  private nextId = 0;

  constructor() {
    this.child = spawn(process.execPath, ['-e', HELPER], { stdio: ['pipe', 'pipe', 'pipe'] });
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const r = JSON.parse(line) as Reply;
      const w = this.waiting.get(r.id);
      if (!w) return;
      this.waiting.delete(r.id);
      if (r.error !== undefined) w.reject(new Error(`${r.error}\n${r.stderr ?? ''}`));
      else w.resolve({ ms: r.ms!, out: r.out! });
    });
    this.child.on('exit', (code) => {
      for (const w of this.waiting.values()) w.reject(new Error(`bench helper exited (${code})`));
      this.waiting.clear();
    });
  }

  /** Runs `file args` to completion in the helper; `ms` is its time as the helper measured it. */
  run(file: string, args: string[]): Promise<{ ms: number; out: string }> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.child.stdin.write(`${JSON.stringify({ id, file, args })}\n`);
    });
  }

  close(): void {
    this.child.stdin.end();
  }
}
