import * as fs from 'node:fs';
import * as path from 'node:path';
import { createHash } from 'node:crypto';
import type { Manifest } from '../../src/core/snapshot';

/**
 * A workspace's content as the crash checks compare it: path → `f <mode> <sha256>`
 * for files, `l <target>` for symlinks; directories only by what they hold. The
 * store (.waypoint) and git's own directory are not part of it.
 */
export type Tree = Record<string, string>;

const SKIP = new Set(['.waypoint', '.git']);

export function diskTree(root: string): Tree {
  const out: Tree = {};
  const walk = (dir: string, prefix: string) => {
    for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!prefix && SKIP.has(d.name)) continue;
      const abs = path.join(dir, d.name);
      const key = prefix + d.name;
      if (d.isDirectory()) walk(abs, `${key}/`);
      else if (d.isSymbolicLink()) out[key] = `l ${fs.readlinkSync(abs)}`;
      else if (d.isFile()) out[key] = fileValue(fs.readFileSync(abs), fs.statSync(abs).mode & 0o111 ? 0o755 : 0o644);
    }
  };
  walk(root, '');
  return out;
}

export function fileValue(bytes: Buffer, mode: number): string {
  return `f ${mode.toString(8)} ${createHash('sha256').update(bytes).digest('hex')}`;
}

/** The tree a checkpoint's manifest describes (what a full rollback to it must produce). */
export function manifestTree(m: Manifest): Tree {
  const out: Tree = {};
  for (const [key, e] of m) {
    if (e.type === 'file') out[key] = `f ${e.mode.toString(8)} ${e.hash}`;
    else if (e.type === 'symlink') out[key] = `l ${e.target}`;
    else out[key] = 'skipped';
  }
  return out;
}

/** The first difference between two trees, for a violation message; null when equal. */
export function treeDiff(a: Tree, b: Tree): string | null {
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  const diffs = keys.filter((k) => a[k] !== b[k]);
  if (!diffs.length) return null;
  return `${diffs.length} path(s) differ, e.g. ${diffs
    .slice(0, 3)
    .map((k) => `${k}: ${a[k] ?? 'absent'} vs ${b[k] ?? 'absent'}`)
    .join('; ')}`;
}

/** What a workload child promises before an operation that rewrites the workspace. */
export interface Expectation {
  op: string;
  before: Tree;
  after: Tree;
  /** Paths under this prefix are left out of both trees (a person edits them meanwhile: checked on their own). */
  ignore?: string;
}

/** `t` without the paths under `prefix`. */
export function withoutPrefix(t: Tree, prefix: string | undefined): Tree {
  if (!prefix) return t;
  return Object.fromEntries(Object.entries(t).filter(([k]) => !k.startsWith(prefix)));
}
