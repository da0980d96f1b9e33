import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { WaypointError } from '../core/model/errors';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { ensurePrivateStoreDir, STORE_FILE_MODE } from '../core/store/storeDir';
import { checkRoots, type SnapshotRoot } from '../core/snapshot';
import { LINK_FILE_NAME, ROOTS_FILE_NAME, linkedStoreOf, ownStoreDirOf, readNoFollow, sameDir } from './storeDirOf';

/**
 * The store of a multi-root window and its links (see storeDirOf.ts for how they are
 * followed). The window that supervises several folders writes, in its store,
 * `roots.json` — every folder with the root name its paths are shown under — and in
 * each other folder `.waypoint/link.json` naming the store. A process that opens
 * the store itself (`waypoint mcp`, `serve`, a CLI command with no owner running)
 * takes its roots from `roots.json`, but only the roots that consent: the first
 * must hold the store (or link to it), every other must link to it. So a planted
 * `roots.json` (a cloned repository's) cannot widen what Waypoint writes to beyond
 * folders the person's own window linked.
 */
const RootsFile = z.strictObject({
  version: z.literal(1),
  roots: z
    .array(z.strictObject({ name: z.string().min(1).max(255), dir: z.string().min(1).max(4096).refine((d) => path.isAbsolute(d), 'a folder must be an absolute path') }))
    .min(2)
    .max(64),
});
const LinkFile = z.strictObject({ version: z.literal(1), store: z.string().min(1).max(4096) });

/** A multi-root store's verified roots; null for a store of one folder (no `roots.json`). */
export function storeRootsOf(storeDir: string): SnapshotRoot[] | null {
  const file = path.join(storeDir, ROOTS_FILE_NAME);
  const text = readNoFollow(file);
  if (text === null) {
    if (fs.existsSync(file)) throw new WaypointError('unsafe_path', `Refusing ${file}: it is not a plain readable file.`);
    return null;
  }
  let parsed: z.infer<typeof RootsFile>;
  try {
    parsed = RootsFile.parse(JSON.parse(text));
  } catch (e) {
    throw new WaypointError('corrupt', `The store's folder list ${file} is not valid (${e instanceof Error ? e.message.slice(0, 300) : String(e)}). Open the window with these folders again (it rewrites the list), or remove the file to use the store for one folder.`);
  }
  const roots = parsed.roots.map((r) => ({ name: r.name, dir: path.resolve(r.dir) }));
  try {
    checkRoots(roots);
  } catch (e) {
    throw new WaypointError('corrupt', `The store's folder list ${file} is not valid: ${e instanceof Error ? e.message : String(e)}.`);
  }
  roots.forEach((r, i) => {
    const holds = i === 0 && sameDir(ownStoreDirOf(r.dir), storeDir);
    const links = linkedStoreOf(ownStoreDirOf(r.dir));
    if (!holds && !(links !== null && sameDir(links, storeDir))) {
      throw new WaypointError(
        'unsafe_path',
        `Refusing the store's folder list ${file}: folder ${r.dir} (${r.name}) does not link back to this store, so it was not the person's window that listed it. Open the window with these folders again (it writes the links), or remove the file.`,
        { path: file, folder: r.dir },
      );
    }
  });
  return roots;
}

/**
 * Records a multi-root window's folders in its store and links every other folder to
 * it; a window of one folder removes a list (and its own link) left by an earlier
 * multi-root session, so its CLI uses its own store again. Returns what it could not
 * link (a folder whose `.waypoint` is a symbolic link, a read-only folder), for the
 * window to say; those folders are still captured, only a CLI started inside them
 * does not find this store.
 */
export function writeStoreRoots(storeDir: string, roots: readonly SnapshotRoot[]): { folder: string; problem: string }[] {
  const problems: { folder: string; problem: string }[] = [];
  if (roots.length < 2) {
    fs.rmSync(path.join(storeDir, ROOTS_FILE_NAME), { force: true });
    if (roots[0]) unlinkFolder(roots[0].dir, problems);
    return problems;
  }
  checkRoots(roots);
  ensureStoreDir(storeDir);
  writeFileAtomicSync(path.join(storeDir, ROOTS_FILE_NAME), JSON.stringify({ version: 1, roots: roots.map((r) => ({ name: r.name, dir: r.dir })) }, null, 2) + '\n', STORE_FILE_MODE);
  roots.forEach((r, i) => {
    const own = ownStoreDirOf(r.dir);
    // The first folder holds the store in its own `.waypoint` unless a setting moved it.
    if (i === 0 && sameDir(own, storeDir)) return unlinkFolder(r.dir, problems);
    try {
      ensureStoreDir(own);
      writeFileAtomicSync(path.join(own, LINK_FILE_NAME), JSON.stringify({ version: 1, store: storeDir }, null, 2) + '\n', STORE_FILE_MODE);
    } catch (e) {
      problems.push({ folder: r.dir, problem: e instanceof Error ? e.message : String(e) });
    }
  });
  return problems;
}

/** The link file's content, parsed (tests and the window's checks). */
export function readLinkFile(folder: string): z.infer<typeof LinkFile> | null {
  const text = readNoFollow(path.join(ownStoreDirOf(folder), LINK_FILE_NAME));
  const r = text === null ? null : LinkFile.safeParse(safeJson(text));
  return r?.success ? r.data : null;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function unlinkFolder(folder: string, problems: { folder: string; problem: string }[]): void {
  try {
    const own = ownStoreDirOf(folder);
    // Only a plain file in a plain directory: a link planted in their place is not followed to delete.
    if (fs.lstatSync(own, { throwIfNoEntry: false })?.isDirectory()) fs.rmSync(path.join(own, LINK_FILE_NAME), { force: true });
  } catch (e) {
    problems.push({ folder, problem: e instanceof Error ? e.message : String(e) });
  }
}

/** As the store creates its own directory: private, never through a symbolic link, and ignored by git. */
function ensureStoreDir(dir: string): void {
  ensurePrivateStoreDir(dir);
  try {
    fs.writeFileSync(path.join(dir, '.gitignore'), '*\n', { flag: 'wx', mode: STORE_FILE_MODE });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
}
