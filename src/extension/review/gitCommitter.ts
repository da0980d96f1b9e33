import * as vscode from 'vscode';
import { GitCliCommitter, type CommitFile, type CommitOutcome, type Committer } from '../../core/review/gitCli';

/** The few members of the built-in git extension's API (`vscode.git`, getAPI(1)) we use. */
interface GitRepository {
  status(): Promise<void>;
}
interface GitApi {
  getRepository(uri: vscode.Uri): GitRepository | null;
}

/**
 * Commits through the `git` command (see GitCliCommitter: the commit is built from
 * the approved contents in a temporary index, so it is whole or nothing and never
 * touches the working tree), then asks the built-in git extension, when it is
 * there, to refresh so the Source Control view shows the new commit at once. The
 * git extension's own API cannot commit contents that differ from the working
 * tree (a partly approved file), nor commit only some paths, so it is not used to
 * commit.
 */
export class VsCodeGitCommitter implements Committer {
  private readonly cli: GitCliCommitter;

  constructor(
    private readonly folder: vscode.Uri,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.cli = new GitCliCommitter(folder.fsPath);
  }

  check(): Promise<void> {
    return this.cli.check();
  }

  async commit(files: readonly CommitFile[], message: string): Promise<CommitOutcome> {
    const r = await this.cli.commit(files, message);
    if (r.sha) await this.refreshScm();
    return r;
  }

  private refreshScm(): Promise<void> {
    return refreshScm(this.folder, this.log);
  }
}

/** Asks the built-in git extension, when it is there, to look at the repository again (after a commit or its undo). */
export async function refreshScm(folder: vscode.Uri, log: vscode.LogOutputChannel): Promise<void> {
  try {
    const ext = vscode.extensions.getExtension<{ getAPI(v: 1): GitApi }>('vscode.git');
    if (!ext?.isActive) return;
    await ext.exports.getAPI(1).getRepository(folder)?.status();
  } catch (e) {
    log.info(`[review] the git extension could not refresh (${(e as Error).message}); the Source Control view catches up on its own`);
  }
}
