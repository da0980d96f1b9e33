import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { sha256Hex } from '../snapshot/blobStore';
import { toKey, type SnapshotRoot } from '../snapshot/paths';
import { writeFileAtomicSync } from '../store/fsutil';
import { STORE_FILE_MODE } from '../store/storeDir';

/**
 * The files Waypoint itself wrote into the workspace (Connect an Agent's `.mcp.json`,
 * `.claude/settings.local.json`, hook files…), by absolute path and the SHA-256 of what
 * it wrote. They are no task's work: a review lists them, if at all, as changed outside
 * the task, and an agent-only rollback leaves them alone. A file later changed again is
 * judged like any other (its content no longer matches).
 *
 * Kept in the store directory (`own-writes.json`, private, never followed through a
 * link), written by whoever wrote the files: the extension or `waypoint connect`, with
 * or without an engine open.
 */
export const OWN_WRITES_FILE = 'own-writes.json';
/** Enough for every config file of every agent, written many times over; the oldest go first. */
const MAX_ENTRIES = 500;

const OwnWritesFile = z.object({
  v: z.literal(1),
  writes: z.array(z.object({ path: z.string(), sha256: z.string().regex(/^[0-9a-f]{64}$/), at: z.number() })).max(MAX_ENTRIES * 2),
});
type OwnWritesFile = z.infer<typeof OwnWritesFile>;

function readFile(storeDir: string): OwnWritesFile {
  try {
    const fd = fs.openSync(path.join(storeDir, OWN_WRITES_FILE), fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
    try {
      if (!fs.fstatSync(fd).isFile()) return { v: 1, writes: [] };
      const parsed = OwnWritesFile.safeParse(JSON.parse(fs.readFileSync(fd, 'utf8')));
      return parsed.success ? parsed.data : { v: 1, writes: [] };
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Missing, a link, unreadable or damaged: no file is known as Waypoint's own (the safe side: a task's files stay listed).
    return { v: 1, writes: [] };
  }
}

/** Records that Waypoint wrote `content` to each absolute `file` (the store directory must exist). */
export function recordOwnWrites(storeDir: string, files: readonly { file: string; content: string | Uint8Array }[], now = Date.now()): void {
  if (!files.length) return;
  const cur = readFile(storeDir);
  const added = files.map((f) => ({ path: f.file, sha256: sha256Hex(typeof f.content === 'string' ? Buffer.from(f.content, 'utf8') : f.content), at: now }));
  const writes = [...cur.writes, ...added].slice(-MAX_ENTRIES);
  writeFileAtomicSync(path.join(storeDir, OWN_WRITES_FILE), JSON.stringify({ v: 1, writes } satisfies OwnWritesFile), STORE_FILE_MODE);
}

/** Path key → the hashes Waypoint wrote there, for the workspace's roots (paths outside them are dropped). */
export function ownWritesByKey(storeDir: string, roots: readonly SnapshotRoot[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  const writes = readFile(storeDir).writes;
  if (!writes.length) return out;
  // Recorded by real path; a root may be named through a link (the person's own path to it).
  const real = roots.map((r) => {
    try {
      return { ...r, dir: fs.realpathSync.native(r.dir) };
    } catch {
      return r;
    }
  });
  for (const w of writes) {
    const key = toKey(roots, w.path) ?? toKey(real, w.path);
    if (!key) continue;
    let set = out.get(key);
    if (!set) out.set(key, (set = new Set()));
    set.add(w.sha256);
  }
  return out;
}
