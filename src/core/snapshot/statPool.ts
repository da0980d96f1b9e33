/**
 * lstat on worker threads, for full rescans of large workspaces. A rescan is mostly
 * one lstat per file (13.6k on the bench workspace, ~5 µs each here) plus a few
 * microseconds of JavaScript per file to compare the result with the previous
 * manifest. Async fs.lstat does not help: its per-call overhead on the main thread
 * equals the syscall. A worker takes a directory's files as one message and answers
 * with one Float64Array, so the main thread compares one directory's files (and
 * walks on) while the workers lstat the next.
 *
 * The pool outlives a scan (a worker costs ~30 ms to start): it belongs to the
 * ListingCache of the workspace, keeps its threads referenced only while a batch is
 * out (an idle pool never keeps a process alive) and ends them after a minute idle.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';

/** Per path: kind (0 error, 1 file, 2 directory, 3 symlink, 4 other), size, mtimeMs, ino, mode. */
export const STAT_FIELDS = 5;
export const KIND_ERROR = 0;
export const KIND_FILE = 1;
export const KIND_DIR = 2;
export const KIND_SYMLINK = 3;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
parentPort.on('message', ({ id, joined }) => {
  const paths = joined.split('\\0');
  const out = new Float64Array(paths.length * ${STAT_FIELDS});
  const errors = [];
  for (let i = 0; i < paths.length; i++) {
    let st;
    try {
      st = fs.lstatSync(paths[i]);
    } catch (err) {
      errors.push({ i, code: err.code || 'EUNKNOWN', message: String(err.message || err) });
      continue;
    }
    const at = i * ${STAT_FIELDS};
    out[at] = st.isFile() ? ${KIND_FILE} : st.isDirectory() ? ${KIND_DIR} : st.isSymbolicLink() ? ${KIND_SYMLINK} : 4;
    out[at + 1] = st.size;
    out[at + 2] = st.mtimeMs;
    out[at + 3] = st.ino;
    out[at + 4] = st.mode;
  }
  parentPort.postMessage({ id, out: out.buffer, errors }, [out.buffer]);
});
`;

const IDLE_MS = 60_000;

export interface StatBatch {
  /** STAT_FIELDS numbers per path, in the order asked. */
  values: Float64Array;
  /** Paths whose lstat failed, by index. */
  errors: Map<number, { code: string; message: string }>;
}

interface Pending {
  resolve: (b: StatBatch) => void;
  reject: (err: Error) => void;
  worker: Worker;
}

/** Paths gathered into one message: a message per directory (7 files on average) cost more than the lstats. */
const GROUP_PATHS = 512;

interface Part {
  from: number;
  count: number;
  resolve: (b: StatBatch) => void;
  reject: (err: Error) => void;
}

export class StatPool {
  private workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private turn = 0;
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(private readonly size = Math.max(1, Math.min(2, os.availableParallelism?.() ?? os.cpus().length))) {}

  private group: string[] = [];
  private parts: Part[] = [];
  private flushScheduled = false;

  /**
   * lstat of each path (not following a final symlink), on a worker. Calls in the
   * same turn of the event loop share a message (up to GROUP_PATHS paths).
   */
  lstatMany(paths: readonly string[]): Promise<StatBatch> {
    return new Promise<StatBatch>((resolve, reject) => {
      this.parts.push({ from: this.group.length, count: paths.length, resolve, reject });
      for (const p of paths) this.group.push(p);
      if (this.group.length >= GROUP_PATHS) this.flush();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => {
          this.flushScheduled = false;
          this.flush();
        });
      }
    });
  }

  private flush(): void {
    if (this.parts.length === 0) return;
    const parts = this.parts;
    const group = this.group;
    this.parts = [];
    this.group = [];
    this.send(group).then(
      ({ values, errors }) => {
        for (const part of parts) {
          const mine = new Map<number, { code: string; message: string }>();
          for (const [i, e] of errors) if (i >= part.from && i < part.from + part.count) mine.set(i - part.from, e);
          part.resolve({ values: values.subarray(part.from * STAT_FIELDS, (part.from + part.count) * STAT_FIELDS), errors: mine });
        }
      },
      (err: Error) => {
        for (const part of parts) part.reject(err);
      },
    );
  }

  private send(paths: readonly string[]): Promise<StatBatch> {
    if (this.workers.length === 0) this.start();
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    const worker = this.workers[this.turn++ % this.workers.length]!;
    const id = this.nextId++;
    // Held while a batch is out: an unreferenced worker would let the process exit under an await.
    if (this.pending.size === 0) for (const w of this.workers) w.ref();
    return new Promise<StatBatch>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, worker });
      // One string: cloning it is a copy, cloning an array of strings is per element. NUL cannot be in a path.
      worker.postMessage({ id, joined: paths.join('\0') });
    });
  }

  private start(): void {
    for (let i = 0; i < this.size; i++) {
      const w = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
      w.on('message', ({ id, out, errors }: { id: number; out: ArrayBuffer; errors: { i: number; code: string; message: string }[] }) => {
        const p = this.pending.get(id);
        if (!p) return;
        this.settled(id);
        p.resolve({ values: new Float64Array(out), errors: new Map(errors.map((e) => [e.i, { code: e.code, message: e.message }])) });
      });
      const fail = (err: Error) => {
        for (const [id, p] of [...this.pending]) {
          if (p.worker !== w) continue;
          this.settled(id);
          p.reject(err);
        }
        this.workers = this.workers.filter((x) => x !== w);
      };
      w.on('error', fail);
      w.on('exit', (code) => fail(new Error(`[snapshot] stat worker exited (code ${code})`)));
      w.unref();
      this.workers.push(w);
    }
  }

  private settled(id: number): void {
    this.pending.delete(id);
    if (this.pending.size > 0) return;
    for (const w of this.workers) w.unref();
    this.idleTimer = setTimeout(() => void this.close(), IDLE_MS);
    this.idleTimer.unref();
  }

  /** Ends the workers; a later call starts new ones. */
  async close(): Promise<void> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    const ws = this.workers;
    this.workers = [];
    await Promise.all(ws.map((w) => w.terminate()));
  }
}
