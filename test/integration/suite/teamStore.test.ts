import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import * as vscode from 'vscode';
import { activated, eventually, waypoint, type WaypointApi } from './extension';

/**
 * Runs only in the launcher's `team` pass, against a throwaway PostgreSQL cluster the
 * launcher started (test/support/pgCluster.ts): Connect refuses a URL with a password
 * and a wrong password and saves nothing; with the right one it saves the URL without
 * the password, and the window's engine records into the team store; a task the CLI
 * records from another "machine" (WAYPOINT_MACHINE) appears in the Team Store view,
 * grouped by machine, on the store's NOTIFY and without a reload; the password is in
 * no setting, no workspace file and no log; a stopped server is said clearly and
 * loses nothing acknowledged; Disconnect goes back to the embedded store.
 */
const url = process.env.WAYPOINT_IT_TEAM_URL ?? '';
const password = process.env.WAYPOINT_IT_TEAM_PASSWORD ?? '';

interface TeamApi extends WaypointApi {
  api(): Promise<import('../../../src/core/engine/api').EngineApi>;
  connectTeamStore(url: string, password: string): Promise<{ ok: true } | { ok: false; message: string }>;
  disconnectTeamStore(): Promise<boolean>;
  teamStoreInUse(): { url: string; where: string } | undefined;
  teamTreeRows(parentId?: string): Promise<{ id: string; label: string; description: string; contextValue: string; icon: string }[]>;
  teamView(): { state: string; description: string; message: string };
  onDidRefreshTeamTree: vscode.Event<void>;
  logDir(): string;
  teamStoreOutage(): string | undefined;
  storeMode(): { kind: string };
  treeDescription(): string;
}

/** Every file under `dir` whose text holds `needle` (a log or settings file, the workspace's store). */
function filesHolding(dir: string, needle: string): string[] {
  const hits: string[] = [];
  const walk = (d: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        try {
          if (fs.readFileSync(p).includes(needle)) hits.push(p);
        } catch {
          // a file that went away meanwhile
        }
      }
    }
  };
  walk(dir);
  return hits;
}

describe('team store in VS Code: connect, record, see every machine live', function () {
  this.timeout(120_000);
  let api: TeamApi;
  let ws: string;
  let cli: string;
  let other: string;
  const withPw = () => {
    const u = new URL(url);
    u.password = encodeURIComponent(password);
    return u.toString();
  };
  const cliJson = async (args: string[], env: NodeJS.ProcessEnv) =>
    JSON.parse((await promisify(execFile)(process.execPath, [cli, ...args, '--json'], { timeout: 60_000, env: { ...process.env, ...env } })).stdout) as Record<string, unknown>;
  const setting = () => vscode.workspace.getConfiguration('waypoint').inspect<string>('teamStore.url');
  /** Resolves on the Team Store view's next refresh. */
  const nextRefresh = () =>
    new Promise<void>((resolve) => {
      const d = api.onDidRefreshTeamTree(() => {
        d.dispose();
        resolve();
      });
    });

  before(async function () {
    if (!url) this.skip(); // not the team pass
    api = (await activated()) as TeamApi;
    ws = vscode.workspace.workspaceFolders![0].uri.fsPath;
    cli = path.join(waypoint().extensionPath, 'dist', 'cli.js');
    other = fs.mkdtempSync(path.join(os.tmpdir(), 'wp-other-machine-'));
    await api.api();
  });
  after(() => other && fs.rmSync(other, { recursive: true, force: true }));

  it('starts disconnected: the embedded store, and the Team Store view offers Connect', async () => {
    assert.equal(api.teamStoreInUse(), undefined);
    assert.equal(api.teamView().state, 'disconnected');
    assert.deepEqual(await api.teamTreeRows(), []);
    const pkg = waypoint().packageJSON as { contributes: { viewsWelcome: { view: string; contents: string }[] } };
    assert.ok(pkg.contributes.viewsWelcome.some((w) => w.view === 'waypoint.team' && w.contents.includes('command:waypoint.connectTeamStore')));
  });

  it('refuses a URL holding a password and a wrong password, and saves nothing', async () => {
    const withPassword = await api.connectTeamStore(withPw(), '');
    assert.equal(withPassword.ok, false);
    assert.match((withPassword as { message: string }).message, /Leave the password out of the URL/);
    const wrong = await api.connectTeamStore(url, 'not-the-password');
    assert.equal(wrong.ok, false);
    assert.match((wrong as { message: string }).message, /refused the user name or password/);
    assert.equal(setting()?.globalValue, undefined);
    assert.equal(api.teamStoreInUse(), undefined);
  });

  it('connects with the right password: the URL is saved without it, and this window records into the team store', async () => {
    const r = await api.connectTeamStore(url, password);
    assert.deepEqual(r, { ok: true });
    assert.equal(setting()?.globalValue, url);
    await eventually(() => api.teamStoreInUse()?.url === url, 'the engine to reopen on the team store', 30_000);
    const { taskId } = await (await api.api()).startTask({ goal: 'Recorded by the window into the team store', agent: 'manual' });
    const all = (await cliJson(['tasks', '--all', '--workspace', other], { WAYPOINT_STORE: withPw() })) as unknown as { id: string; workspace: string }[];
    assert.ok(
      all.some((t) => t.id === taskId && t.workspace === ws),
      `the window's task is in the team store: ${JSON.stringify(all).slice(0, 500)}`,
    );
    // This machine, this window's workspace, its task: the same words and icon as the Tasks view.
    await vscode.commands.executeCommand('waypoint.team.focus');
    const machines = await eventually(async () => {
      const m = await api.teamTreeRows();
      return m.length ? m : undefined;
    }, 'the Team Store view to list this machine');
    assert.equal(machines.length, 1);
    assert.match(machines[0].description, /^this machine · 1 workspace · 1 task$/);
    const [here] = await api.teamTreeRows(machines[0].id);
    assert.equal(here.label, path.basename(ws));
    assert.match(here.contextValue, /^teamWorkspace:here$/);
    const [task] = await api.teamTreeRows(here.id);
    assert.equal(task.label, 'Recorded by the window into the team store');
    assert.match(task.description, /^running · manual · /);
    assert.equal(task.icon, 'sync~spin');
    assert.match(api.teamView().description, /^127\.0\.0\.1:\d+\/waypoint$/);
    assert.match(api.treeDescription(), /^team store 127\.0\.0\.1:\d+\/waypoint$/, 'the Tasks view says where its tasks are recorded');
  });

  it('shows a task the CLI records from another machine, grouped by machine, live through NOTIFY (no reload)', async () => {
    // Rendered once so that the refresh awaited below can only come from the store's NOTIFY.
    await api.teamTreeRows();
    await new Promise((r) => setTimeout(r, 500));
    const refreshed = nextRefresh();
    const started = await cliJson(['task', 'start', '--workspace', other, '--goal', 'Fix the flaky deploy on the build box'], { WAYPOINT_STORE: withPw(), WAYPOINT_MACHINE: 'build-box-7' });
    await Promise.race([refreshed, new Promise((_, reject) => setTimeout(() => reject(new Error('the Team Store view did not refresh on the NOTIFY within 15 s')), 15_000))]);
    const machines = await api.teamTreeRows();
    assert.deepEqual(
      machines.map((m) => m.label),
      [machines[0].label, 'build-box-7'],
      'this machine first, then the other',
    );
    const box = machines[1];
    assert.equal(box.description, '1 workspace · 1 task');
    assert.equal(box.icon, 'vm');
    const [w] = await api.teamTreeRows(box.id);
    assert.equal(w.label, path.basename(other));
    const [t] = await api.teamTreeRows(w.id);
    assert.equal(t.label, 'Fix the flaky deploy on the build box');
    assert.equal(t.contextValue, 'teamTask:running');
    assert.match(t.id, new RegExp(`${String(started.taskId)}$`));
  });

  it('says clearly when the server stops, loses nothing acknowledged, and recovers on Retry', async () => {
    const ctl = JSON.parse(process.env.WAYPOINT_IT_TEAM_PG_CTL ?? '{}') as { bin: string; data: string; log: string };
    const pgCtl = (...args: string[]) => execFileSync('runuser', ['-u', 'postgres', '--', path.join(ctl.bin, 'pg_ctl'), '-D', ctl.data, ...args], { timeout: 60_000 });
    const engine = await api.api();
    const { taskId } = await engine.startTask({ goal: 'Acknowledged before the outage', agent: 'manual' });
    pgCtl('-m', 'immediate', '-w', 'stop');
    try {
      await eventually(() => api.teamView().state === 'unreachable', 'the Team Store view to say the store is unreachable', 30_000);
      // The window reopens on a store that is down: the link waits and says why.
      await vscode.commands.executeCommand('waypoint.reconnectTeamStore');
      assert.notEqual(api.storeMode().kind, 'owner');
      // The one notification with Retry / Show Log, naming the cause.
      assert.match(await eventually(() => api.teamStoreOutage(), 'the outage notice'), /team store/i);
    } finally {
      pgCtl('-l', ctl.log, '-w', 'start');
    }
    await vscode.commands.executeCommand('waypoint.reconnectTeamStore');
    await eventually(() => api.storeMode().kind === 'owner' && api.teamStoreInUse()?.url === url, 'the window to own its store on the team store again', 60_000);
    const t = await (await api.api()).taskDetail(taskId);
    assert.equal(t.task.goal, 'Acknowledged before the outage');
    await eventually(async () => api.teamView().state === 'connected' && (await api.teamTreeRows()).length === 2, 'the Team Store view to recover', 30_000);
  });

  it('disconnects: the setting and the password are gone, and the window is back on its embedded store', async () => {
    assert.equal(await api.disconnectTeamStore(), true);
    assert.equal(setting()?.globalValue, undefined);
    await eventually(() => api.storeMode().kind === 'owner' && api.teamStoreInUse() === undefined, 'the engine to reopen on the embedded store', 30_000);
    await eventually(() => api.teamView().state === 'disconnected', 'the Team Store view to show its welcome');
    assert.deepEqual(await api.teamTreeRows(), []);
  });

  it('forgets the password on Disconnect: the same URL set by hand opens nothing and says why', async () => {
    await vscode.workspace.getConfiguration('waypoint').update('teamStore.url', url, vscode.ConfigurationTarget.Global);
    assert.match(await eventually(() => api.teamStoreOutage(), 'the outage notice', 30_000), /password/i);
    assert.notEqual(api.storeMode().kind, 'owner');
    await vscode.workspace.getConfiguration('waypoint').update('teamStore.url', undefined, vscode.ConfigurationTarget.Global);
    await eventually(() => api.storeMode().kind === 'owner' && api.teamStoreInUse() === undefined, 'the embedded store again', 30_000);
  });

  it('refuses a hand-edited URL holding a password: the embedded store stays, the view says why', async () => {
    await vscode.workspace.getConfiguration('waypoint').update('teamStore.url', withPw(), vscode.ConfigurationTarget.Global);
    try {
      await eventually(() => api.teamView().state === 'invalid', 'the Team Store view to refuse the setting');
      await eventually(() => api.storeMode().kind === 'owner', 'the window to own its store');
      assert.equal(api.teamStoreInUse(), undefined, 'a refused setting never connects');
      const { taskId } = await (await api.api()).startTask({ goal: 'Recorded in the embedded store', agent: 'manual' });
      assert.ok((await (await api.api()).taskDetail(taskId)).task);
    } finally {
      await vscode.workspace.getConfiguration('waypoint').update('teamStore.url', undefined, vscode.ConfigurationTarget.Global);
    }
  });
  it('kept the password out of settings, the workspace and the logs, through every step above', async () => {
    assert.ok(password.length >= 12);
    const userData = path.resolve(api.logDir(), '..', '..', '..', '..');
    // The grep must see the log: the line Connect wrote is there (log files are written asynchronously).
    await eventually(() => filesHolding(userData, '[team] connected to postgresql://').length > 0, 'the Waypoint log on disk', 20_000);
    assert.deepEqual(filesHolding(userData, password), [], 'no file under the editor data (settings, logs) holds the password');
    assert.deepEqual(filesHolding(ws, password), [], 'no file in the workspace holds the password');
  });

});
