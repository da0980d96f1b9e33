/**
 * Stat-cache checks on worker threads, for full rescans of large workspaces. A
 * rescan is mostly one lstat per file (13.6k on the bench workspace, ~5 µs each
 * here) and a comparison with the previous manifest's entry. Async fs.lstat does not
 * help: its per-call overhead on the main thread equals the syscall. A worker takes
 * directories' files (with what the previous manifest says of each) as one message,
 * lstats and compares them, and answers with only the entries that differ, so the
 * main thread walks on and touches nothing for an unchanged file.
 *
 * The pool outlives a scan (a worker costs ~30 ms to start): it belongs to the
 * ListingCache of the workspace, keeps its threads referenced only while a batch is
 * out (an idle pool never keeps a process alive) and ends them after a minute idle.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';

/** Per entry answered: kind (1 file, 2 directory, 3 symlink, 4 other), size, mtimeMs, ino, mode, ctimeMs. */
export const STAT_FIELDS = 6;
export const KIND_FILE = 1;
export const KIND_DIR = 2;
export const KIND_SYMLINK = 3;

/** Per entry of a check: PREV_FIELDS numbers describing what the previous manifest holds. */
export const PREV_FIELDS = 5;
/** prev[0]: the previous entry is a file the stat cache may vouch for (else the entry always needs attention). */
export const PREV_CACHEABLE = 1;

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
// lstat each entry and compare it with what the previous manifest holds (cacheable,
// size, mtimeMs, ino, exec bit) and whether its inode changed since the previous
// manifest was vouched for (ctime; scanRecord.ts ctimeBefore, the same test): only
// entries that differ come back, with their stat.
parentPort.on('message', ({ id, bases, counts, names, prev, maxBytes, verifiedAt }) => {
  const list = names.split('\\0');
  const prevs = new Float64Array(prev);
  const idx = [];
  const vals = [];
  const errors = [];
  let i = 0;
  for (let d = 0; d < bases.length; d++) {
    const base = bases[d];
    for (const end = i + counts[d]; i < end; i++) {
      let st;
      try {
        st = fs.lstatSync(base + list[i]);
      } catch (err) {
        errors.push({ i, code: err.code || 'EUNKNOWN', message: String(err.message || err) });
        continue;
      }
      const p = i * ${PREV_FIELDS};
      const file = st.isFile();
      if (prevs[p] === ${PREV_CACHEABLE} && file && st.size <= maxBytes && st.size === prevs[p + 1] && st.mtimeMs === prevs[p + 2] && st.ino === prevs[p + 3] && ((st.mode & 0o111) !== 0 ? 1 : 0) === prevs[p + 4] && (verifiedAt === null || st.ctimeMs + (st.ctimeMs % 1000 === 0 ? 2000 : 50) < verifiedAt)) continue;
      idx.push(i);
      vals.push(file ? ${KIND_FILE} : st.isDirectory() ? ${KIND_DIR} : st.isSymbolicLink() ? ${KIND_SYMLINK} : 4, st.size, st.mtimeMs, st.ino, st.mode, st.ctimeMs);
    }
  }
  const at = new Int32Array(idx);
  const out = new Float64Array(vals);
  parentPort.postMessage({ id, idx: at.buffer, out: out.buffer, errors }, [at.buffer, out.buffer]);
});
`;

const IDLE_MS = 60_000;

/** What a check found: the entries that need attention, by index, with their lstat. */
export interface StatCheck {
  /** Indexes (into the names asked) whose lstat differs from the previous entry, or that had no cacheable one; ascending. */
  idx: Int32Array;
  /** STAT_FIELDS numbers (kind, size, mtimeMs, ino, mode, ctimeMs) per index in `idx`. */
  values: Float64Array;
  /** Entries whose lstat failed, by index. */
  errors: Map<number, { code: string; message: string }>;
}

interface Message {
  bases: string[];
  counts: number[];
  names: string;
  prev: ArrayBuffer;
  maxBytes: number;
  /** ScanOptions.previousVerifiedAtMs of the checks in this message (null: unset). */
  verifiedAt: number | null;
}

interface Pending {
  resolve: (b: StatCheck) => void;
  reject: (err: Error) => void;
  worker: Worker;
}

/** Entries gathered into one message: a message per directory (7 files on average) cost more than the lstats. */
const GROUP_ENTRIES = 512;

interface Part {
  from: number;
  count: number;
  resolve: (b: StatCheck) => void;
  reject: (err: Error) => void;
}

export class StatPool {
  private workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;
  private turn = 0;
  private idleTimer: NodeJS.Timeout | null = null;
  private bases: string[] = [];
  private counts: number[] = [];
  /** Per part: its names joined by NUL, and its PREV_FIELDS numbers per name. */
  private names: string[] = [];
  private prev: Float64Array[] = [];
  /** Entries in the parts gathered so far. */
  private entries = 0;
  private parts: Part[] = [];
  private maxBytes = 0;
  private verifiedAt: number | null = null;
  private flushScheduled = false;

  constructor(private readonly size = Math.max(1, Math.min(2, os.availableParallelism?.() ?? os.cpus().length))) {}

  /**
   * lstats `base + name` for each of `count` (> 0) names (`names` joined by NUL; not
   * following a final symlink) on a worker and compares it with `prev` (PREV_FIELDS
   * numbers per name, copied when the message goes, so unchanged until this settles:
   * PREV_CACHEABLE or 0,
   * size, mtimeMs, ino, exec bit 0/1); answers with the entries that differ. Files
   * over `maxBytes` always differ, and so do files whose inode changed (ctime) since
   * `verifiedAtMs` (see ScanOptions.previousVerifiedAtMs). Calls in the same turn of
   * the event loop share a message (up to GROUP_ENTRIES entries) when they ask with
   * the same `maxBytes` and `verifiedAtMs`.
   */
  check(base: string, names: string, count: number, prev: Float64Array, maxBytes: number, verifiedAtMs?: number): Promise<StatCheck> {
    return new Promise<StatCheck>((resolve, reject) => {
      const verifiedAt = verifiedAtMs ?? null;
      if (this.parts.length > 0 && (maxBytes !== this.maxBytes || verifiedAt !== this.verifiedAt)) this.flush();
      this.parts.push({ from: this.entries, count, resolve, reject });
      this.bases.push(base);
      this.counts.push(count);
      this.names.push(names);
      this.prev.push(prev);
      this.entries += count;
      this.maxBytes = maxBytes;
      this.verifiedAt = verifiedAt;
      if (this.entries >= GROUP_ENTRIES) this.flush();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(() => {
          this.flushScheduled = false;
          this.flush();
        });
      }
    });
  }

  /** Starts the workers ahead of a first check (a worker takes ~30 ms to start); they idle unreferenced. */
  warm(): void {
    if (this.workers.length > 0) return;
    this.start();
    this.idleTimer = setTimeout(() => void this.close(), IDLE_MS);
    this.idleTimer.unref();
  }

  private flush(): void {
    if (this.parts.length === 0) return;
    const parts = this.parts;
    // Names as one string: cloning it is a copy, cloning an array of strings is per element. NUL cannot be in a name.
    const prev = new Float64Array(this.entries * PREV_FIELDS);
    let at = 0;
    for (const p of this.prev) {
      prev.set(p, at);
      at += p.length;
    }
    const msg: Message = { bases: this.bases, counts: this.counts, names: this.names.join('\0'), prev: prev.buffer, maxBytes: this.maxBytes, verifiedAt: this.verifiedAt };
    this.parts = [];
    this.bases = [];
    this.counts = [];
    this.names = [];
    this.prev = [];
    this.entries = 0;
    this.send(msg).then(
      ({ idx, values, errors }) => {
        // Split the group's answer back into its parts (idx is ascending).
        let k = 0;
        for (const part of parts) {
          const end = part.from + part.count;
          const start = k;
          while (k < idx.length && idx[k]! < end) k++;
          const mine = new Map<number, { code: string; message: string }>();
          for (const [i, e] of errors) if (i >= part.from && i < end) mine.set(i - part.from, e);
          const partIdx = idx.slice(start, k);
          for (let j = 0; j < partIdx.length; j++) partIdx[j] = partIdx[j]! - part.from;
          part.resolve({ idx: partIdx, values: values.subarray(start * STAT_FIELDS, k * STAT_FIELDS), errors: mine });
        }
      },
      (err: Error) => {
        for (const part of parts) part.reject(err);
      },
    );
  }

  private send(msg: Message): Promise<StatCheck> {
    if (this.workers.length === 0) this.start();
    if (this.idleTimer) {
      clearTimeout(this.idleTimer);
      this.idleTimer = null;
    }
    const worker = this.workers[this.turn++ % this.workers.length]!;
    const id = this.nextId++;
    // Held while a batch is out: an unreferenced worker would let the process exit under an await.
    if (this.pending.size === 0) for (const w of this.workers) w.ref();
    return new Promise<StatCheck>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, worker });
      worker.postMessage({ id, ...msg }, [msg.prev]);
    });
  }

  private start(): void {
    for (let i = 0; i < this.size; i++) {
      const w = new Worker(WORKER_SOURCE, { eval: true, execArgv: [] });
      w.on('message', ({ id, idx, out, errors }: { id: number; idx: ArrayBuffer; out: ArrayBuffer; errors: { i: number; code: string; message: string }[] }) => {
        const p = this.pending.get(id);
        if (!p) return;
        this.settled(id);
        p.resolve({ idx: new Int32Array(idx), values: new Float64Array(out), errors: new Map(errors.map((e) => [e.i, { code: e.code, message: e.message }])) });
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
