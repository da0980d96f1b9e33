import * as path from 'node:path';
import * as vscode from 'vscode';
import { GitCliCommitter, isGitWorkTree, type CommitOutcome, type Committer } from '../../core/review/gitCli';

/** The few members of the built-in git extension's API (`vscode.git`, getAPI(1)) we use. */
interface GitRepository {
  readonly rootUri: vscode.Uri;
  readonly state: { readonly indexChanges: readonly { readonly uri: vscode.Uri }[] };
  status(): Promise<void>;
  add(paths: string[]): Promise<void>;
  commit(message: string): Promise<void>;
  getCommit(ref: string): Promise<{ hash: string }>;
}
interface GitApi {
  getRepository(uri: vscode.Uri): GitRepository | null;
  openRepository?(root: vscode.Uri): Promise<GitRepository | null>;
}

/**
 * Commits through the built-in git extension when it is enabled and the index holds
 * nothing but approved paths; otherwise through `git commit --only`, which commits
 * exactly the approved paths and leaves the person's other staged changes staged
 * (the git API has no pathspec-limited commit, so it would sweep them in).
 */
export class VsCodeGitCommitter implements Committer {
  constructor(
    private readonly folder: vscode.Uri,
    private readonly log: vscode.LogOutputChannel,
  ) {}

  async commit(paths: readonly string[], message: string): Promise<CommitOutcome> {
    if (!(await isGitWorkTree(this.folder.fsPath))) return { sha: null, reason: 'The workspace is not a git repository.' };
    if (paths.length === 0) return { sha: null, reason: 'No approved changes to commit.' };
    const repo = await this.repository();
    if (repo) {
      await repo.status();
      const approved = new Set(paths.map((p) => path.join(this.folder.fsPath, ...p.split('/'))));
      const foreign = repo.state.indexChanges.filter((c) => !approved.has(c.uri.fsPath));
      if (foreign.length === 0) {
        try {
          await repo.add([...approved]);
          await repo.commit(message);
          const head = await repo.getCommit('HEAD');
          return { sha: head.hash, via: 'vscode.git' };
        } catch (e) {
          this.log.warn(`[review] the git extension could not commit (${(e as Error).message}); using the git command`);
        }
      } else {
        this.log.info(`[review] ${foreign.length} unrelated staged change(s): committing with git commit --only so they stay staged`);
      }
    }
    return new GitCliCommitter(this.folder.fsPath).commit(paths, message);
  }

  private async repository(): Promise<GitRepository | null> {
    try {
      const ext = vscode.extensions.getExtension<{ getAPI(v: 1): GitApi }>('vscode.git');
      if (!ext) return null;
      const api = (ext.isActive ? ext.exports : await ext.activate()).getAPI(1);
      return api.getRepository(this.folder) ?? (await api.openRepository?.(this.folder)) ?? null;
    } catch (e) {
      this.log.info(`[review] git extension unavailable (${(e as Error).message}); using the git command`);
      return null;
    }
  }
}
