/**
 * Git ignore semantics over the `ignore` package: one rule level per `.gitignore`
 * (patterns relative to its own directory) and per `.git/info/exclude`; deeper
 * levels override shallower ones, negations included. The person's exclude list is
 * applied on top and cannot be re-included by a `.gitignore`.
 */
import fss from 'node:fs';
import path from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { readRegularSync } from './noBlockRead.js';

export interface RuleLevel {
  /** Directory of the rules relative to the root, '' or ending in '/'. */
  base: string;
  ig: Ignore;
}

export class IgnoreRules {
  constructor(
    readonly levels: readonly RuleLevel[],
    private readonly userExcludes: Ignore | null,
  ) {}

  static root(excludes: readonly string[] | undefined): IgnoreRules {
    const user = excludes && excludes.length > 0 ? ignore().add([...excludes]) : null;
    return new IgnoreRules([], user);
  }

  with(level: RuleLevel | null): IgnoreRules {
    return level ? new IgnoreRules([...this.levels, level], this.userExcludes) : this;
  }

  /** Whether `other` holds the very same rules (same level objects, same excludes): then it ignores exactly what this does. */
  sameAs(other: IgnoreRules): boolean {
    if (other === this) return true;
    if (other.userExcludes !== this.userExcludes || other.levels.length !== this.levels.length) return false;
    for (let i = 0; i < this.levels.length; i++) if (other.levels[i] !== this.levels[i]) return false;
    return true;
  }

  /** `rel` is relative to the root, POSIX, non-empty. */
  ignores(rel: string, isDir: boolean): boolean {
    const suffix = isDir ? '/' : '';
    if (this.userExcludes?.ignores(rel + suffix)) return true;
    let ignored = false;
    for (const level of this.levels) {
      if (!rel.startsWith(level.base)) continue;
      const r = level.ig.test(rel.slice(level.base.length) + suffix);
      if (r.ignored) ignored = true;
      else if (r.unignored) ignored = false;
    }
    return ignored;
  }
}

/**
 * Rule levels kept between scans, by ignore file, with the stat they were read under
 * (the scanner's ListingCache holds one): an unchanged file gives back the very same
 * level, so rules built from it compare equal (`IgnoreRules.sameAs`) from scan to scan.
 */
export type LevelMemo = Map<string, { sig: string; level: RuleLevel | null }>;

// Synchronous: ignore files are tiny and read once per directory during a walk
// that is itself synchronous for metadata (see scan/walk.ts).
function readText(file: string): string | null {
  return readTextAt(file, statQuiet(file));
}

/** The file's stat, or undefined where it cannot be there (missing, a parent that is not a directory, no access). */
function statQuiet(file: string): fss.Stats | undefined {
  try {
    return fss.statSync(file, { throwIfNoEntry: false });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EACCES') return undefined;
    throw err;
  }
}

function readTextAt(file: string, st: fss.Stats | undefined): string | null {
  try {
    // Most directories have no such file: a stat that returns undefined is far cheaper
    // than the ENOENT exception readFileSync would build (a stack trace each).
    if (!st) return null;
    // Not readFileSync: an ignore file that is (or turns into) a FIFO or a device must not block the scan.
    return readRegularSync(file)?.bytes.toString('utf8') ?? null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'EACCES') return null;
    throw err;
  }
}

/** Finds `info/exclude` for the repository whose `.git` is in `absDir` (a dir, or a worktree's `gitdir:` file). */
function infoExcludePath(absDir: string): string | null {
  const dotGit = path.join(absDir, '.git');
  const st = fss.lstatSync(dotGit, { throwIfNoEntry: false });
  if (!st) return null;
  if (st.isDirectory()) return path.join(dotGit, 'info', 'exclude');
  if (!st.isFile()) return null;
  const m = readText(dotGit)?.match(/^gitdir:\s*(.+?)\s*$/m);
  if (!m) return null;
  const gitDir = path.resolve(absDir, m[1]!);
  // Linked worktrees share info/exclude with the main repository (the common dir).
  const common = readText(path.join(gitDir, 'commondir'))?.trim();
  return path.join(common ? path.resolve(gitDir, common) : gitDir, 'info', 'exclude');
}

/**
 * Rule levels contributed by directory `absDir` (relative `relDir`, '' for the root):
 * its repository's info/exclude (if `.git` is here), then its `.gitignore`.
 * `hasGitignore` / `hasDotGit` skip the lookups when a directory listing already told.
 */
export function levelsForDir(absDir: string, relDir: string, hasGitignore: boolean | null, hasDotGit: boolean | null, memo?: LevelMemo): RuleLevel[] {
  const base = relDir === '' ? '' : `${relDir}/`;
  const out: RuleLevel[] = [];
  const level = (file: string) => {
    const st = statQuiet(file);
    // Changed content changes one of these; the ctime catches a rewrite within the mtime's tick.
    const sig = st ? `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}:${base}` : '';
    const kept = memo?.get(file);
    if (kept && kept.sig === sig && sig !== '') return kept.level;
    const text = readTextAt(file, st);
    const made = text ? { base, ig: ignore().add(text) } : null;
    // A file written within the last two seconds could change again within its mtime's tick: not kept.
    if (memo) {
      if (st && Date.now() - Math.max(st.mtimeMs, st.ctimeMs) > 2000) memo.set(file, { sig, level: made });
      else memo.delete(file);
    }
    return made;
  };
  if (hasDotGit !== false) {
    const excl = infoExcludePath(absDir);
    const made = excl ? level(excl) : null;
    if (made) out.push(made);
  }
  if (hasGitignore !== false) {
    const made = level(path.join(absDir, '.gitignore'));
    if (made) out.push(made);
  }
  return out;
}
