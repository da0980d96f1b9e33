import type { Pool } from 'pg';
import { createTwoFilesPatch } from 'diff';
import { z } from 'zod';
import { WaypointError } from '../../model/errors';
import { Identifier, type CheckpointData, type CheckpointMeta } from '../../model/schema';
import { diffCheckpoint, isBinary, type FileChangeWithLines } from '../../snapshot/diff';
import { ManifestStore, hasNoContent, type Manifest, type ManifestEntry } from '../../snapshot/manifest';
import { pathKeyProblem } from '../../snapshot/paths';
import type { WorkspaceIdentity } from '../eventLog';
import { createPool, isConnectionError, unavailable } from './connection';
import { PgBlobs } from './pgBlobs';
import { ensurePoolSchema } from './schema';
import { EVENT_COLUMNS, rowToEvent } from './rows';

/**
 * Reviewing a task from any machine with only the team store's URL: its checkpoints
 * (from its events) and its changes (manifests and file contents from the store's
 * shared objects, each checked against its hash). Reads only: the workspace's files
 * are restored only on the machine that holds them.
 */

const WorkspaceId = z.string().regex(/^[A-Za-z0-9_-]{8,64}$/, 'must be a workspace id as `waypoint tasks --all --json` shows it (workspaceId)');

/** A checkpoint as the team store knows it, with whether its objects are there to review. */
export interface TeamCheckpoint extends CheckpointMeta {
  /** Its manifest object is in the store (contents go first, so a present manifest means its files are too). */
  uploaded: boolean;
  /** Removed by the workspace's retention policy. */
  pruned?: true;
}

export interface TeamFileChange extends FileChangeWithLines {
  /** Unified diff (`--- a/… +++ b/…`), when asked for; null for binary or uncaptured content (see `note`). */
  patch?: string | null;
  note?: string;
}

export interface TeamChanges {
  workspace: WorkspaceIdentity;
  taskId: string;
  from: string;
  to: string;
  changes: TeamFileChange[];
}

export interface ChangesRequest {
  taskId: string;
  /** Default: the task's base checkpoint (its first). */
  from?: string;
  /** Default: its latest checkpoint. */
  to?: string;
  /** Only this path. */
  path?: string;
  /** Include each file's unified diff. */
  patch?: boolean;
}

export class TeamReview {
  private readonly objects: PgBlobs;
  private readonly manifests: ManifestStore;

  private constructor(
    private readonly pool: Pool,
    private readonly url: string,
    readonly workspace: WorkspaceIdentity,
  ) {
    this.objects = new PgBlobs(pool, url);
    const refuse = (): never => {
      throw new WaypointError('invalid_input', 'The team store is read here, never written.');
    };
    this.manifests = new ManifestStore({ get: (h) => this.objects.get(h), put: refuse, flush: refuse }, { cacheSize: 4 });
  }

  /** Opens the store for one workspace (its id as `tasks --all --json` lists it); an unknown id is a clear refusal. */
  static async open(url: string, workspaceId: string): Promise<TeamReview> {
    const id = WorkspaceId.safeParse(workspaceId);
    if (!id.success) throw new WaypointError('invalid_input', `Invalid workspace id ${JSON.stringify(String(workspaceId).slice(0, 80))}: ${id.error.issues[0]?.message}.`);
    const pool = createPool(url, { application: 'waypoint review' });
    try {
      await ensurePoolSchema(pool);
      const r = await pool.query('SELECT id, machine, path FROM waypoint.workspaces WHERE id = $1', [id.data]);
      const row = r.rows[0] as { id: string; machine: string; path: string } | undefined;
      if (!row) throw new WaypointError('not_found', `No workspace '${id.data}' in the team store. \`waypoint tasks --all --json\` lists every workspace's tasks with their workspaceId.`);
      return new TeamReview(pool, url, { id: row.id, machine: row.machine, path: row.path });
    } catch (e) {
      await pool.end().catch(() => undefined);
      throw isConnectionError(e) ? unavailable(e, url, 'read from') : e;
    }
  }

  /** The workspace's machine and path, for a refusal that says where its files are. */
  static async describe(url: string, workspaceId: string): Promise<WorkspaceIdentity | null> {
    try {
      const r = await TeamReview.open(url, workspaceId);
      await r.close();
      return r.workspace;
    } catch (e) {
      if (e instanceof WaypointError && e.code === 'not_found') return null;
      throw e;
    }
  }

  private async rows(sql: string, params: unknown[]): Promise<Record<string, unknown>[]> {
    try {
      return (await this.pool.query(sql, params)).rows as Record<string, unknown>[];
    } catch (e) {
      throw isConnectionError(e) ? unavailable(e, this.url, 'read from') : e;
    }
  }

  /** The task's checkpoints in the order they were taken. */
  async checkpoints(taskId: string): Promise<TeamCheckpoint[]> {
    const id = Identifier.safeParse(taskId);
    if (!id.success) throw new WaypointError('invalid_input', `Invalid task id: ${id.error.issues[0]?.message}.`);
    const known = await this.rows('SELECT 1 FROM waypoint.tasks WHERE workspace_id = $1 AND id = $2', [this.workspace.id, id.data]);
    if (!known.length) throw new WaypointError('not_found', `No task '${id.data}' in workspace ${this.workspace.id} (${this.workspace.machine}:${this.workspace.path}).`);
    // Pruning and damage are recorded by retention and verify, not always under the task's id.
    const events = (
      await this.rows(
        `SELECT ${EVENT_COLUMNS} FROM waypoint.events WHERE workspace_id = $1
         AND ((task_id = $2 AND type = 'checkpoint.created') OR type IN ('checkpoint.pruned', 'checkpoint.damaged')) ORDER BY seq`,
        [this.workspace.id, id.data],
      )
    ).map(rowToEvent);
    const out = new Map<string, TeamCheckpoint>();
    for (const e of events) {
      if (e.type === 'checkpoint.created') {
        const d = e.data as CheckpointData;
        out.set(d.checkpointId, { id: d.checkpointId, taskId: e.taskId, stepId: d.stepId, kind: d.kind, label: d.label, parentId: d.parentId, createdAt: e.ts, manifestRef: d.manifestRef, files: d.files, filesChanged: d.filesChanged, bytes: d.bytes, uploaded: false });
      } else if (e.type === 'checkpoint.pruned') {
        for (const c of (e.data as { checkpointIds: string[] }).checkpointIds) {
          const cp = out.get(c);
          if (cp) cp.pruned = true;
        }
      } else if (e.type === 'checkpoint.damaged') {
        for (const c of (e.data as { checkpoints: { checkpointId: string; reason: string }[] }).checkpoints) {
          const cp = out.get(c.checkpointId);
          if (cp) cp.damaged = c.reason;
        }
      }
    }
    const list = [...out.values()];
    const present = await this.objects.present(list.map((c) => c.manifestRef).filter((r): r is string => !!r));
    for (const c of list) c.uploaded = !!c.manifestRef && present.has(c.manifestRef);
    return list;
  }

  /** What changed between two of the task's checkpoints (default: base → latest), read from the store. */
  async changes(req: ChangesRequest): Promise<TeamChanges> {
    if (req.path !== undefined) {
      const problem = pathKeyProblem(req.path);
      if (problem) throw new WaypointError('invalid_input', `Invalid path ${JSON.stringify(req.path.slice(0, 200))}: ${problem}.`);
    }
    const cps = await this.checkpoints(req.taskId);
    if (!cps.length) throw new WaypointError('not_found', `Task ${req.taskId} has no checkpoints yet.`);
    const pick = (id: string | undefined, fallback: TeamCheckpoint): TeamCheckpoint => {
      if (id === undefined) return fallback;
      const c = cps.find((x) => x.id === id);
      if (!c) throw new WaypointError('not_found', `Task ${req.taskId} has no checkpoint '${String(id).slice(0, 128)}'. Its checkpoints: ${cps.map((x) => x.id).join(', ')}.`);
      return c;
    };
    const from = pick(req.from, cps[0]!);
    const to = pick(req.to, cps[cps.length - 1]!);
    const [a, b] = [await this.manifestOf(from), await this.manifestOf(to)];
    const scope = (m: Manifest): Manifest => (req.path === undefined ? m : new Map([...m].filter(([k]) => k === req.path)));
    const changes: TeamFileChange[] = await diffCheckpoint(scope(a), scope(b), { get: (h) => this.objects.get(h) });
    if (req.patch) for (const c of changes) await this.addPatch(c);
    return { workspace: this.workspace, taskId: req.taskId, from: from.id, to: to.id, changes };
  }

  private async manifestOf(c: TeamCheckpoint): Promise<Manifest> {
    if (c.pruned) throw new WaypointError('not_found', `Checkpoint ${c.id} was pruned by its workspace's retention policy; choose another.`);
    if (c.damaged) throw new WaypointError('corrupt', `Checkpoint ${c.id} is damaged: ${c.damaged}. Choose another checkpoint.`);
    if (!c.manifestRef) throw new WaypointError('invalid_input', `Checkpoint ${c.id} holds no files (it was recorded without a workspace snapshot).`);
    if (!c.uploaded) {
      throw new WaypointError(
        'not_found',
        `Checkpoint ${c.id}'s files are not in the team store yet: its workspace (${this.workspace.machine}:${this.workspace.path}) uploads them after each checkpoint, and resumes when it next runs with the team store.`,
        { checkpointId: c.id },
      );
    }
    return this.manifests.load(c.manifestRef);
  }

  private async content(e: ManifestEntry | undefined): Promise<Buffer | null> {
    if (!e) return null;
    if (e.type === 'file') return this.objects.get(e.hash);
    if (e.type === 'symlink') return Buffer.from(`${e.target}\n`);
    return null;
  }

  private async addPatch(c: TeamFileChange): Promise<void> {
    if (hasNoContent(c.before) || hasNoContent(c.after)) {
      c.patch = null;
      c.note = 'content not captured (too large or unreadable when the checkpoint was taken)';
      return;
    }
    const [x, y] = [await this.content(c.before), await this.content(c.after)];
    if ((x && isBinary(x)) || (y && isBinary(y))) {
      c.patch = null;
      c.note = 'binary';
      return;
    }
    const oldName = c.before ? `a/${c.path}` : '/dev/null';
    const newName = c.after ? `b/${c.path}` : '/dev/null';
    c.patch = createTwoFilesPatch(oldName, newName, x ? x.toString('utf8') : '', y ? y.toString('utf8') : '', undefined, undefined, { context: 3 });
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined);
  }
}
