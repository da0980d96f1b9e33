import * as path from 'node:path';
import { errorMessage } from '../core/model/errors';
import { DEFAULT_RPC_CONNECT_TIMEOUT_MS, postLoopback } from '../core/engine/loopback';
import { HOOK_AGENTS, HOOK_ROUTES, isHookAgent } from '../mcp/hookRoutes';
import { findOwnerLite } from '../ownership/findOwnerLite';
import { STORE_CLAIM_HEADER, claimHeader, storeClaimOf, type StoreClaim } from '../core/store/folderIdentity';
import { DISCOVERY_FILE_NAME, findWorkspace, storeDirOf } from '../ownership/storeDirOf';
import { hookLog, readHookInput } from './hookLog';

/**
 * `waypoint hook <agent>` when a store owner is serving: read the event, hand it to the
 * owner's hook route, exit. Agents run hooks synchronously around every tool call, so
 * this path loads only what it needs for that (no engine, no sql.js, no MCP SDK): a
 * relayed hook costs a Node start and one loopback POST. Anything else — no owner, an
 * unusual argument, an owner that does not answer — is handed to the full CLI, which
 * resolves the store (and may own it) exactly as before.
 */
export type FastHookOutcome = { handled: true } | { handled: false; hookInput?: string };

/** `hook <agent> [--workspace DIR | -w DIR | --workspace=DIR] [--wait N]`; null for anything else. */
export function parseHookArgs(argv: readonly string[]): { agent: string; workspace: string } | null {
  if (argv[0] !== 'hook' || argv.length < 2 || !isHookAgent(argv[1])) return null;
  let workspace: string | undefined;
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if ((a === '--workspace' || a === '-w') && i + 1 < argv.length) workspace = argv[++i];
    else if (a.startsWith('--workspace=')) workspace = a.slice('--workspace='.length);
    else if (a === '--wait' && i + 1 < argv.length) i++;
    else return null;
  }
  // As the full CLI finds it (walking up like git), so both paths reach the same store.
  if (workspace === undefined) return { agent: argv[1], workspace: findWorkspace(process.cwd()) };
  return workspace ? { agent: argv[1], workspace } : null;
}

export async function fastHook(argv: readonly string[]): Promise<FastHookOutcome> {
  const args = parseHookArgs(argv);
  if (!args || !isHookAgent(args.agent)) return { handled: false };
  const out = await relay({ agent: args.agent, workspace: args.workspace });
  // The agent's neutral answer (Cursor, Gemini CLI and Cline read one from stdout), once, when this path answered.
  if (out.handled && HOOK_AGENTS[args.agent].stdout) process.stdout.write(`${HOOK_AGENTS[args.agent].stdout}\n`);
  return out;
}

async function relay(args: { agent: keyof typeof HOOK_AGENTS; workspace: string }): Promise<FastHookOutcome> {
  let owner;
  let claim: StoreClaim | null = null;
  try {
    const dir = storeDirOf(args.workspace);
    owner = findOwnerLite(dir, path.join(dir, DISCOVERY_FILE_NAME));
    claim = storeClaimOf(dir);
  } catch {
    // A linked or unreadable store: the full CLI says why, in the same words as every command.
    return { handled: false };
  }
  // Not proven to serve this folder (a copy holds the original's files): the full CLI sorts it out.
  if (owner?.kind !== 'serving' || !claim) return { handled: false };
  const workspace = args.workspace;
  let text: string;
  try {
    text = await readHookInput();
    JSON.parse(text);
  } catch (e) {
    hookLog(workspace, `not recorded: ${e instanceof SyntaxError ? `hook input is not JSON: ${e.message}` : errorMessage(e)}`);
    return { handled: true };
  }
  const d = owner.discovery;
  try {
    const res = await postLoopback(new URL(HOOK_ROUTES[args.agent], d.url), { [STORE_CLAIM_HEADER]: claimHeader(claim), authorization: `Bearer ${d.token}`, 'content-type': 'application/json' }, text, {
      timeoutMs: 20_000,
      connectTimeoutMs: DEFAULT_RPC_CONNECT_TIMEOUT_MS,
    });
    // An owner of another store (this folder is a copy) ran nothing: the full CLI sorts it out.
    if (res.status === 409) return { handled: false, hookInput: text };
    // Reached the owner: whatever it says is final (retrying a refusal would only repeat it).
    if (res.status !== 200) hookLog(workspace, `not recorded: the owner answered ${res.status}: ${res.text.slice(0, 500)}`);
    else {
      const out = JSON.parse(res.text) as { ok?: boolean; error?: string };
      if (out.ok === false) hookLog(workspace, `not recorded: ${out.error ?? 'refused by the owner'}`);
    }
    return { handled: true };
  } catch {
    // The owner vanished or stalled before it answered. Hook events are idempotent (a
    // recorder checks each against what is recorded), so the full CLI takes the event we
    // already read and does what it always did: look for the store's holder, or own it.
    return { handled: false, hookInput: text };
  }
}
