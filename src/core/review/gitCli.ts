import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** What committing the approved paths produced: a hash, or why there is none. */
export type CommitOutcome = { sha: string; via: string } | { sha: null; reason: string };

export interface Committer {
  /** Stages and commits exactly `paths` (workspace-relative POSIX keys), nothing else. */
  commit(paths: readonly string[], message: string): Promise<CommitOutcome>;
}

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function git(cwd: string, args: readonly string[], input?: string): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    // --literal-pathspecs: a file named `*` or `:(glob)x` is that file, not a pattern.
    const child = spawn('git', ['--literal-pathspecs', '-c', 'core.quotepath=off', ...args], { cwd, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e: NodeJS.ErrnoException) =>
      reject(e.code === 'ENOENT' && !fs.existsSync(cwd) ? new Error(`git cannot run in ${cwd}: the folder does not exist`) : e),
    );
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
    // A child that failed to start closes its stdin; that EPIPE is reported through 'error' above.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

/** True when `dir` is inside a git work tree (and the git binary exists). */
export async function isGitWorkTree(dir: string): Promise<boolean> {
  try {
    const r = await git(dir, ['rev-parse', '--is-inside-work-tree']);
    return r.code === 0 && r.stdout.trim() === 'true';
  } catch {
    return false;
  }
}

/**
 * Commits through the `git` command. `git commit --only -- <paths>` commits the
 * work-tree content of exactly those paths and leaves anything else the person had
 * staged still staged, untouched — so unrelated staged work is never swept in.
 * New files are added first (`--only` accepts only paths git knows).
 */
export class GitCliCommitter implements Committer {
  constructor(private readonly workspace: string) {}

  async commit(paths: readonly string[], message: string): Promise<CommitOutcome> {
    const cwd = this.workspace;
    if (!(await isGitWorkTree(cwd))) return { sha: null, reason: 'The workspace is not a git repository.' };
    if (paths.length === 0) return { sha: null, reason: 'No approved changes to commit.' };
    // Pathspecs are relative to cwd (the workspace folder, maybe below the repo root).
    const prefix = (await git(cwd, ['rev-parse', '--show-prefix'])).stdout.trim();
    const strip = (p: string) => (prefix && p.startsWith(prefix) ? p.slice(prefix.length) : p);
    const known = new Set<string>();
    const index = await git(cwd, ['ls-files', '-z', '--full-name', '--cached', '--', ...paths]);
    const head = await git(cwd, ['ls-tree', '-r', '-z', '--name-only', '--full-name', 'HEAD', '--', ...paths]);
    for (const p of `${index.stdout}\0${head.code === 0 ? head.stdout : ''}`.split('\0').filter(Boolean)) known.add(strip(p));
    // A path deleted from the work tree that git never tracked has nothing to commit.
    const commitPaths = paths.filter((p) => known.has(p) || fs.existsSync(path.join(cwd, ...p.split('/'))));
    if (commitPaths.length === 0) return { sha: null, reason: 'Nothing to commit: the approved files match what git already has.' };
    const add = await git(cwd, ['add', '-A', '--', ...commitPaths]);
    if (add.code !== 0) throw new Error(`git add failed: ${add.stderr.trim()}`);
    // A file that was only staged (never committed) and is now deleted leaves git's
    // knowledge with that add; `commit --only` would refuse the whole commit over it.
    const staged = await git(cwd, ['ls-files', '-z', '--full-name', '--cached', '--', ...commitPaths]);
    const inHead = new Set(`${head.code === 0 ? head.stdout : ''}`.split('\0').filter(Boolean).map(strip));
    const stillKnown = new Set([...inHead, ...staged.stdout.split('\0').filter(Boolean).map(strip)]);
    const toCommit = commitPaths.filter((p) => stillKnown.has(p));
    if (toCommit.length === 0) return { sha: null, reason: 'Nothing to commit: the approved files match what git already has.' };
    const r = await git(cwd, ['commit', '--only', '--no-edit', '-F', '-', '--', ...toCommit], message);
    if (r.code !== 0) {
      const out = `${r.stdout}\n${r.stderr}`;
      if (/nothing (added )?to commit|no changes added/i.test(out)) return { sha: null, reason: 'Nothing to commit: the approved files match the last commit.' };
      throw new Error(`git commit failed: ${(r.stderr || r.stdout).trim()}`);
    }
    const sha = await git(cwd, ['rev-parse', 'HEAD']);
    return { sha: sha.stdout.trim(), via: 'git' };
  }
}
