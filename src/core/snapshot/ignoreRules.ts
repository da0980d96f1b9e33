/**
 * Git ignore semantics over the `ignore` package: one rule level per `.gitignore`
 * (patterns relative to its own directory) and per `.git/info/exclude`; deeper
 * levels override shallower ones, negations included. The person's exclude list is
 * applied on top and cannot be re-included by a `.gitignore`.
 */
import fss from 'node:fs';
import path from 'node:path';
import ignore, { type Ignore } from 'ignore';

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

// Synchronous: ignore files are tiny and read once per directory during a walk
// that is itself synchronous for metadata (see scanner.ts).
function readText(file: string): string | null {
  try {
    // Most directories have no such file: a stat that returns undefined is far cheaper
    // than the ENOENT exception readFileSync would build (a stack trace each).
    if (!fss.statSync(file, { throwIfNoEntry: false })) return null;
    return fss.readFileSync(file, 'utf8');
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
export function levelsForDir(absDir: string, relDir: string, hasGitignore: boolean | null, hasDotGit: boolean | null): RuleLevel[] {
  const base = relDir === '' ? '' : `${relDir}/`;
  const out: RuleLevel[] = [];
  if (hasDotGit !== false) {
    const excl = infoExcludePath(absDir);
    const text = excl ? readText(excl) : null;
    if (text) out.push({ base, ig: ignore().add(text) });
  }
  if (hasGitignore !== false) {
    const text = readText(path.join(absDir, '.gitignore'));
    if (text) out.push({ base, ig: ignore().add(text) });
  }
  return out;
}
