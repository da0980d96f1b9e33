import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { WaypointError } from '../model/errors';

/** What committing the approved paths produced: a hash, or why there is none. */
export type CommitOutcome = { sha: string; via: string } | { sha: null; reason: string };

/** One path of the commit: the bytes it must hold (null: removed from the commit). */
export interface CommitFile {
  path: string;
  content: Buffer | null;
  /** How git records it; ignored when `content` is null. */
  kind: 'file' | 'executable' | 'symlink';
  /** `content` is the working tree file's bytes as they are: git may read the file itself (in one batch). */
  asInWorkTree?: boolean;
}

/** Why git would refuse (or did refuse) the commit; surfaces offer a way out per kind. */
export type GitProblem = 'identity' | 'index_locked' | 'in_progress' | 'unmerged' | 'commit_failed';

/**
 * A commit git refused or would refuse. Thrown before anything changed (the checks),
 * or after git ran and failed — in both cases the working tree, the index and the
 * task are as they were.
 */
export class CommitRefusedError extends WaypointError {
  constructor(
    readonly problem: GitProblem,
    message: string,
    /** The repository's top folder, so a surface can offer to fix it there. */
    readonly repoRoot: string | null,
  ) {
    super('invalid_input', message, { gitProblem: problem, repoRoot });
    this.name = 'CommitRefusedError';
  }
}

export interface Committer {
  /**
   * Checks everything that can be checked before anything changes (git identity,
   * an index lock, a merge or rebase in progress) and throws a CommitRefusedError
   * naming the first problem. Does nothing outside a git repository.
   */
  check(): Promise<void>;
  /**
   * Commits exactly `files` with these contents on top of HEAD — not the working
   * tree and not the person's index — and leaves the working tree alone. On
   * failure nothing is left changed.
   */
  commit(files: readonly CommitFile[], message: string): Promise<CommitOutcome>;
}

export interface GitResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function git(cwd: string, args: readonly string[], input?: string | Buffer, env: NodeJS.ProcessEnv = {}): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    // --literal-pathspecs: a file named `*` or `:(glob)x` is that file, not a pattern.
    const child = spawn('git', ['--literal-pathspecs', '-c', 'core.quotepath=off', ...args], { cwd, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, GIT_TERMINAL_PROMPT: '0', ...env } });
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

const IN_PROGRESS: readonly [string, string][] = [
  ['MERGE_HEAD', 'a merge'],
  ['rebase-merge', 'a rebase'],
  ['rebase-apply', 'a rebase (or git am)'],
  ['CHERRY_PICK_HEAD', 'a cherry-pick'],
  ['REVERT_HEAD', 'a revert'],
];

/**
 * Commits through the `git` command without touching the working tree or the
 * person's index: the commit is built in a temporary index (HEAD plus exactly the
 * approved contents, so a partly approved file commits only its approved hunks and
 * unrelated staged work is never swept in), and `git commit` runs on it — hooks
 * included. Only after it succeeds are the committed paths' entries in the real
 * index set to the new HEAD, as `git commit --only` would. A refused commit leaves
 * no trace: the temporary index is removed, nothing else was written.
 */
export class GitCliCommitter implements Committer {
  constructor(private readonly workspace: string) {}

  async check(): Promise<void> {
    const cwd = this.workspace;
    if (!(await isGitWorkTree(cwd))) return;
    const root = (await git(cwd, ['rev-parse', '--show-toplevel'])).stdout.trim();
    for (const [who, name] of [['GIT_AUTHOR_IDENT', 'author'], ['GIT_COMMITTER_IDENT', 'committer']] as const) {
      const r = await git(cwd, ['var', who]);
      if (r.code !== 0) {
        throw new CommitRefusedError(
          'identity',
          `git does not know who you are (no ${name} identity), so it would refuse the commit. Set user.name and user.email for this repository (git config user.name "Your Name"; git config user.email you@example.com), then commit again: your decisions are kept.`,
          root,
        );
      }
    }
    const lock = await gitPath(cwd, 'index.lock');
    if (fs.existsSync(lock)) {
      throw new CommitRefusedError(
        'index_locked',
        `Another git process is using this repository (${path.relative(root, lock) || lock} exists). Wait for it to finish; if no git command is running, delete that file. Then commit again: your decisions are kept.`,
        root,
      );
    }
    for (const [marker, what] of IN_PROGRESS) {
      if (fs.existsSync(await gitPath(cwd, marker))) {
        throw new CommitRefusedError('in_progress', `The repository is in the middle of ${what}. Finish or abort it first (see the Source Control view), then commit again: your decisions are kept.`, root);
      }
    }
    const unmerged = await git(cwd, ['ls-files', '-u', '-z']);
    if (unmerged.code === 0 && unmerged.stdout) {
      throw new CommitRefusedError('unmerged', 'The index has unresolved merge conflicts. Resolve them first, then commit again: your decisions are kept.', root);
    }
  }

  async commit(files: readonly CommitFile[], message: string): Promise<CommitOutcome> {
    const cwd = this.workspace;
    if (!(await isGitWorkTree(cwd))) return { sha: null, reason: 'The workspace is not a git repository.' };
    if (files.length === 0) return { sha: null, reason: 'No approved changes to commit.' };
    await this.check();
    const root = (await git(cwd, ['rev-parse', '--show-toplevel'])).stdout.trim();
    // Index paths are relative to the repository's top; workspace keys to the workspace folder.
    const prefix = (await git(cwd, ['rev-parse', '--show-prefix'])).stdout.trim();
    const tmpIndex = path.join(path.dirname(await gitPath(cwd, 'index')), `waypoint-index-${randomUUID()}`);
    const env = { GIT_INDEX_FILE: tmpIndex };
    const run = async (args: readonly string[], input?: string | Buffer): Promise<string> => {
      const r = await git(root, args, input, env);
      if (r.code !== 0) throw new Error(`git ${args[0]} failed: ${(r.stderr || r.stdout).trim()}`);
      return r.stdout;
    };
    try {
      const hasHead = (await git(root, ['rev-parse', '--verify', '-q', 'HEAD'])).code === 0;
      await run(hasHead ? ['read-tree', 'HEAD'] : ['read-tree', '--empty']);
      const mode = (f: CommitFile) => (f.kind === 'symlink' ? '120000' : f.kind === 'executable' ? '100755' : '100644');
      const lines: string[] = [];
      // Files committed as they are in the working tree are hashed in one git call (through
      // the repository's clean filters, as `git add` would); a review of a thousand files
      // does not spawn a thousand processes. Partly approved content and symlinks go one by one.
      // (A path with a newline cannot be written one per line: it goes alone.)
      const batch = files.filter((f) => f.content !== null && f.asInWorkTree && f.kind !== 'symlink' && !f.path.includes('\n'));
      const batched = new Set(batch);
      if (batch.length) {
        const shas = (await run(['hash-object', '-w', '--stdin-paths'], batch.map((f) => `${prefix}${f.path}\n`).join(''))).trim().split('\n');
        if (shas.length !== batch.length) throw new Error('git hash-object did not hash every approved file');
        batch.forEach((f, i) => lines.push(`${mode(f)} ${shas[i]}\t${prefix}${f.path}`));
      }
      for (const f of files) {
        const full = prefix + f.path;
        if (f.content === null) {
          lines.push(`0 ${'0'.repeat(40)}\t${full}`);
          continue;
        }
        if (batched.has(f)) continue;
        const args = f.kind === 'symlink' ? ['hash-object', '-w', '--stdin', '--no-filters'] : ['hash-object', '-w', '--stdin', `--path=${full}`];
        const sha = (await run(args, f.content)).trim();
        lines.push(`${mode(f)} ${sha}\t${full}`);
      }
      await run(['update-index', '-z', '--index-info'], lines.map((l) => `${l}\0`).join(''));
      const same = hasHead ? (await git(root, ['diff-index', '--cached', '--quiet', 'HEAD'], undefined, env)).code === 0 : (await run(['ls-files'])).trim() === '';
      if (same) return { sha: null, reason: 'Nothing to commit: the approved changes match the last commit.' };
      const r = await git(root, ['commit', '--no-edit', '-q', '-F', '-'], message, env);
      if (r.code !== 0) {
        throw new CommitRefusedError('commit_failed', `git refused the commit: ${(r.stderr || r.stdout).trim() || `exit ${r.code}`}. Nothing was changed; fix it and commit again: your decisions are kept.`, root);
      }
    } finally {
      fs.rmSync(tmpIndex, { force: true });
      fs.rmSync(`${tmpIndex}.lock`, { force: true });
    }
    const sha = (await git(root, ['rev-parse', 'HEAD'])).stdout.trim();
    // The person's index now agrees with the new HEAD for the committed paths (as
    // `commit --only` leaves it); everything else they staged stays staged.
    // Paths go through stdin, NUL-separated: a review of thousands of files stays under the argument limit.
    await git(root, ['reset', '-q', '--pathspec-from-file=-', '--pathspec-file-nul', 'HEAD'], files.map((f) => `${prefix}${f.path}\0`).join(''));
    return { sha, via: 'git' };
  }
}

/** An absolute path inside the repository's git directory (worktrees and GIT_DIR respected). */
async function gitPath(cwd: string, name: string): Promise<string> {
  const r = await git(cwd, ['rev-parse', '--path-format=absolute', '--git-path', name]);
  return r.stdout.trim();
}
