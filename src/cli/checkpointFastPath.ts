import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_RPC_CONNECT_TIMEOUT_MS, DEFAULT_RPC_TIMEOUT_MS, RpcTransportError, postLoopback } from '../core/engine/loopback';
import { notCapturedWarning } from '../core/engine/notCaptured';
import { displayText } from '../core/model/displayText';
import { plural } from '../core/model/plural';
import { STORE_CLAIM_HEADER, claimHeader, storeClaimOf } from '../core/store/folderIdentity';
import { findOwnerLite } from '../ownership/findOwnerLite';
import { DISCOVERY_FILE_NAME, findWorkspace, storeDirOf } from '../ownership/storeDirOf';

/**
 * `waypoint checkpoint` when a store owner is serving: one RPC to the owner, its answer
 * printed as the full CLI prints it. An agent without an editor checkpoints around its
 * tool calls, and a background owner's checkpoint of a watched tree takes milliseconds,
 * so the full CLI's load (the engine, sql.js, zod: most of a call) would be most of the
 * cost. Like the hook fast path it can only decline: an unusual argument, no serving
 * owner, an owner that does not answer its probe, or any refusal goes to the full CLI,
 * which resolves the store and words every error as it always has.
 *
 * A declined call is never done twice: the fast path names its call with an idempotency
 * key (the engine's own form, `checkpoint:<uuid>`, unless --key gave one) and hands the
 * full CLI that key, so a call the owner did carry out is answered from its record.
 */
export type FastCheckpointOutcome = { handled: true; stdout: string; stderr: string } | { handled: false; argv: string[] };

export interface CheckpointArgs {
  workspace: string;
  taskId: string;
  label?: string;
  key?: string;
  json: boolean;
}

/** The plain form: `checkpoint --task ID [--label L] [--key K] [--json] [--workspace DIR]` (and `-t`, `-w`, `--x=v`); null for anything else. */
export function parseCheckpointArgs(argv: readonly string[], cwd = process.cwd()): CheckpointArgs | null {
  if (argv[0] !== 'checkpoint') return null;
  const values: Record<string, string> = {};
  let json = false;
  const names: Record<string, string> = { '--task': 'task', '-t': 'task', '--label': 'label', '--key': 'key', '--workspace': 'workspace', '-w': 'workspace' };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--json') {
      json = true;
      continue;
    }
    const eq = a.startsWith('--') ? a.indexOf('=') : -1;
    const flag = eq > 0 ? a.slice(0, eq) : a;
    const name = names[flag];
    // Anything else (--dirty, --store, --verbose, a typo, a repeated flag) is the full CLI's to judge.
    if (!name || name in values) return null;
    const value = eq > 0 ? a.slice(eq + 1) : argv[++i];
    // A value that looks like a flag (or none) is the full CLI's to word as a usage error.
    if (value === undefined || (eq < 0 && value.startsWith('-'))) return null;
    values[name] = value;
  }
  if (!values.task) return null;
  let workspace: string;
  if (values.workspace === undefined) workspace = findWorkspace(cwd);
  else {
    // A directory here, as the full CLI takes it; a team-store workspace id (not a folder) is the full CLI's.
    workspace = path.resolve(cwd, values.workspace);
    if (!fs.statSync(workspace, { throwIfNoEntry: false })?.isDirectory()) return null;
  }
  return { workspace, taskId: values.task, label: values.label, key: values.key, json };
}

/** The timeout the full CLI gives a relayed call (WAYPOINT_RPC_TIMEOUT seconds); null when the variable is not one it accepts. */
function rpcTimeoutMs(env: NodeJS.ProcessEnv): number | null {
  const v = env.WAYPOINT_RPC_TIMEOUT;
  if (v === undefined || v === '') return DEFAULT_RPC_TIMEOUT_MS;
  return /^\d+$/.test(v) && Number(v) >= 1 && Number(v) <= 86_400 ? Number(v) * 1000 : null;
}

/** How long the owner may take to answer the probe before the full CLI is asked to look at it (a stopped or stalled owner). */
const PROBE_TIMEOUT_MS = 2_000;

export async function fastCheckpoint(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<FastCheckpointOutcome> {
  const decline = (key?: string): FastCheckpointOutcome => ({ handled: false, argv: key && !argv.some((a) => a === '--key' || a.startsWith('--key=')) ? [...argv, '--key', key] : [...argv] });
  let args: CheckpointArgs | null;
  try {
    args = parseCheckpointArgs(argv);
  } catch {
    return decline();
  }
  const timeoutMs = rpcTimeoutMs(env);
  // A team store's calls (its URL in the environment) are the full CLI's: it says where the store is.
  if (!args || timeoutMs === null || (env.WAYPOINT_STORE ?? '').trim() !== '') return decline();
  let owner;
  let claim;
  try {
    const dir = storeDirOf(args.workspace);
    owner = findOwnerLite(dir, path.join(dir, DISCOVERY_FILE_NAME));
    claim = storeClaimOf(dir);
  } catch {
    return decline();
  }
  if (owner?.kind !== 'serving' || !claim) return decline();
  const d = owner.discovery;
  const url = new URL('/rpc', d.url);
  const headers = { [STORE_CLAIM_HEADER]: claimHeader(claim), authorization: `Bearer ${d.token}`, 'content-type': 'application/json' };
  const post = (method: string, arg: unknown, ms: number) => postLoopback(url, headers, JSON.stringify({ method, arg }), { timeoutMs: ms, connectTimeoutMs: DEFAULT_RPC_CONNECT_TIMEOUT_MS });
  try {
    // The full CLI's cheap question first: an owner that is stopped or stalled is found out before the real call.
    const probe = await post('info', undefined, PROBE_TIMEOUT_MS);
    if (probe.status !== 200 || (JSON.parse(probe.text) as { ok?: unknown }).ok !== true) return decline();
  } catch {
    return decline();
  }
  const key = args.key ?? `checkpoint:${randomUUID()}`;
  let res: { status: number; text: string };
  try {
    res = await post('checkpoint', { taskId: args.taskId, label: args.label, idempotencyKey: key }, timeoutMs);
  } catch (e) {
    // Delivered or not, the full CLI repeats the call under the same key: answered from the record if it was done.
    return decline(e instanceof RpcTransportError ? key : undefined);
  }
  let body: { ok?: unknown; result?: unknown };
  try {
    body = JSON.parse(res.text) as typeof body;
  } catch {
    return decline(key);
  }
  const r = body.result as { checkpointId?: unknown; filesChanged?: unknown } | undefined;
  // A refusal (nothing was done) or an answer of an unexpected shape: the full CLI words it.
  if (res.status !== 200 || body.ok !== true || !r || typeof r.checkpointId !== 'string' || typeof r.filesChanged !== 'number') return decline(key);
  const stdout = (args.json ? JSON.stringify(r, null, 2) : displayText(`Checkpoint ${r.checkpointId} (${plural(r.filesChanged, 'file')} changed)`, { multiline: true })) + '\n';
  const warning = notCapturedWarning(r);
  return { handled: true, stdout, stderr: warning ? `waypoint: ${warning}\n` : '' };
}
