import { randomUUID } from 'node:crypto';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { DEFAULT_RPC_CONNECT_TIMEOUT_MS, postLoopback } from '../core/engine/api';
import { Engine } from '../core/engine/engine';
import { Logger } from '../core/log';
import { WaypointError, errorMessage } from '../core/model/errors';
import { displayText } from '../core/model/displayText';
import { handleHook } from '../hooks';
import { HOOK_AGENTS, HOOK_AGENT_NAMES, type HookAgent } from '../mcp/hookRoutes';
import { applyConnect, connectPreview, launchFor, planConnect, type AgentKind } from '../mcp/connect';
import { startOwnerEndpoint } from '../mcp/owner';
import { resolveStore, storeLocationOf } from '../ownership/resolve';
import { ownOrRelay } from '../ownership/ownOrRelay';
import { isBackgroundOwner } from '../ownership/backgroundStart';
import { askBackgroundOwnerForStore } from '../ownership/handover';
import { describeOwner } from '../core/store/ownerLock';
import { runStdio } from '../mcp/stdio';
import { AgentRollbackPolicy } from '../mcp/tools';
import { headlessRollback } from '../mcp/headlessRollback';
import { hookLog, readHookInput } from './hookLog';
import { awaitStartingOwnerOf, closeStartingOwner } from './backgroundAfterCall';
import { UsageError, intOption, optional } from './args';
import type { Command, Ctx } from './command';

/**
 * The agent doors on the command line: `serve` (own the store, serve MCP over
 * HTTP), `mcp` (MCP over stdio, relaying to an owner if there is one), `connect`
 * (write an agent's configuration) and `hook claude-code` (one Claude Code hook event).
 */

const s = { type: 'string' as const };
const b = { type: 'boolean' as const };

/** Logs go to stderr: for `mcp` stdout belongs to the MCP frames. */
function stderrLogger(verbose: boolean): Logger {
  return new Logger((level, line) => {
    if (verbose || level === 'warn' || level === 'error') process.stderr.write(`waypoint: ${displayText(line, { multiline: true })}\n`);
  });
}

function rollbackPolicy(c: Ctx): AgentRollbackPolicy {
  const v = optional(c.values, 'agent-rollback') ?? process.env.WAYPOINT_AGENT_ROLLBACK ?? 'ask';
  const r = AgentRollbackPolicy.safeParse(v);
  if (!r.success) throw new UsageError(`--agent-rollback must be ask, allow or deny, not '${v}'.`);
  return r.data;
}

function untilSignal(): Promise<string> {
  return new Promise((resolve) => {
    const on = (sig: string) => () => resolve(sig);
    process.once('SIGINT', on('SIGINT'));
    process.once('SIGTERM', on('SIGTERM'));
    process.once('SIGHUP', on('SIGHUP'));
  });
}

/** Asks y/N on the terminal; anything but y/yes (or the end of input) is no. */
async function askYesNo(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await new Promise<string>((resolve) => {
      rl.once('close', () => resolve(''));
      rl.question(question, resolve);
    });
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

const connect = (agent: AgentKind): Command => ({
  summary:
    agent === 'codex'
      ? 'write Waypoint’s hooks into .codex/hooks.json and print the ~/.codex/config.toml entry for its MCP server'
      : agent === 'claude-code' || agent === 'cursor'
        ? `write Waypoint’s MCP server and hooks into ${agent}’s project config`
        : `write Waypoint’s hooks into ${agent}’s project config`,
  usage: `waypoint connect ${agent} [--yes] [--print] [--cli PATH]`,
  options: { print: b, cli: s, yes: b },
  async run(c) {
    const plan = planConnect(agent, launchFor(c.workspace, optional(c.values, 'cli')));
    if (c.values.print) {
      c.out([...plan.files.map((f) => `# ${f.file}${f.changed ? '' : ' (unchanged)'}${f.local ? ' (machine-local)' : ''}\n${f.content}`), ...(plan.snippet ? [`# ~/.codex/config.toml (add by hand)\n${plan.snippet}`] : [])].join('\n'), plan);
      return;
    }
    // Agent configuration runs commands on this machine: it is shown before it is written,
    // and written only on a yes (or --yes, for scripts).
    const changed = plan.files.filter((f) => f.changed);
    if (changed.length && c.values.yes !== true) {
      const rels = changed.map((f) => path.relative(c.workspace, f.file));
      if (!c.json) process.stdout.write(`${displayText(connectPreview(plan), { multiline: true })}\n`);
      if (!c.json && process.stdin.isTTY && process.stdout.isTTY) {
        if (!(await askYesNo(`Write ${rels.join(', ')}? [y/N] `))) {
          c.out('Nothing written.', { agent, written: [], files: plan.files.map((f) => f.file) });
          return;
        }
      } else {
        throw new UsageError(`Nothing written: 'waypoint connect ${agent}' would write ${rels.join(', ')} (${c.json ? 'run it without --json to see the diff' : 'the diff is above'}). Run it again with --yes to write them, or in a terminal to be asked.`);
      }
    }
    const written = applyConnect(plan);
    if (plan.snippet !== undefined) {
      // The snippet runs the launcher just written (written here, since config.toml lives outside the workspace).
      const wrote = written.length ? `Wrote ${written.map((f) => path.relative(c.workspace, f)).join(', ')}.\n` : '';
      c.out(`${wrote}Add this to ~/.codex/config.toml (Waypoint does not write outside the workspace):\n\n${plan.snippet}`, { agent, snippet: plan.snippet, written });
      return;
    }
    c.out(
      written.length ? `Connected ${agent}: wrote ${written.map((f) => path.relative(c.workspace, f)).join(', ')}` : `${agent} is already connected; nothing changed.`,
      { agent, written, files: plan.files.map((f) => f.file) },
    );
  },
});

/**
 * A hook event the fast path (entry.ts) already read from stdin before handing over to
 * the full CLI (the owner it found went away before the event was delivered).
 */
let prereadHookInput: string | undefined;
export function usePrereadHookInput(text: string): void {
  prereadHookInput = text;
}

/** How long a replaced `serve` keeps refusing calls (with the reason) before it exits. */
const LOST_GRACE_MS = 5_000;

export const MCP_COMMANDS: Record<string, Command> = {
  serve: {
    summary: 'own the store and serve MCP over HTTP on 127.0.0.1 until SIGINT/SIGTERM (endpoint in .waypoint/mcp.json)',
    usage: 'waypoint serve [--agent-rollback ask|allow|deny] [--port N] [--verbose]',
    options: { 'agent-rollback': s, port: s, verbose: b },
    async run(c) {
      const log = stderrLogger(c.values.verbose === true);
      const agentRollback = rollbackPolicy(c);
      // A folder of a multi-root window serves that window's store, with its folders (see storeRoots.ts).
      const at = storeLocationOf(c.workspace);
      // The one switch (ownOrRelay.ts): `serve` only ever owns. A background owner (which a
      // first call starts by default) is asked for the store, as a window asks; a store
      // another process serves is refused with who and where.
      const decision = ownOrRelay(at.storeDir, log);
      let lockWaitMs = intOption(c.values, 'lock-wait') ?? 2000;
      if (decision.kind === 'relay') {
        const refused = isBackgroundOwner(decision.owner) ? await askBackgroundOwnerForStore(at.storeDir, decision.discovery) : 'it is not a background owner';
        if (refused !== null) {
          throw new WaypointError('locked', `The store in ${at.storeDir} is already served by ${describeOwner(decision.owner)} at ${decision.discovery.url}; agents and the CLI reach it there. Stop that process to serve it from here.`);
        }
        log.info(`the background owner (pid ${decision.owner.pid}) is handing the store over`);
        // It finishes the calls in flight first, then releases the lock.
        lockWaitMs = Math.max(lockWaitMs, 30_000);
      }
      const engine = await Engine.open({ workspace: at.workspace, storeDir: at.storeDir, ...(at.roots ? { snapshots: { roots: at.roots } } : {}), log, sweepIntervalMs: 5_000, ...(c.teamStore ? { teamStore: c.teamStore } : {}), store: { lock: { waitMs: lockWaitMs, ownerId: `waypoint-serve:${randomUUID()}` } } });
      try {
        const endpoint = await startOwnerEndpoint({ engine, log, agentRollback, rollback: headlessRollback(engine), port: intOption(c.values, 'port') });
        // Replaced as the owner after a stall past the lease: every call is already refused
        // (lost_ownership); stop serving so clients find the new owner, and exit non-zero.
        let lostSub: { dispose(): void } | undefined;
        const lost = new Promise<WaypointError>((resolve) => (lostSub = engine.eventLog.onDidLoseOwnership(resolve)));
        const stop = untilSignal();
        c.out(`Serving Waypoint MCP for ${c.workspace} at ${endpoint.http.url} (token in ${endpoint.discoveryFile})`, {
          url: endpoint.http.url,
          discoveryFile: endpoint.discoveryFile,
          pid: process.pid,
        });
        const why = await Promise.race([stop, lost]);
        lostSub?.dispose();
        if (why instanceof WaypointError) {
          log.error(`[mcp] ${why.message}`);
          // Keep answering for a moment, every call with lost_ownership, so clients that
          // were mid-call learn why rather than seeing a dropped connection.
          await new Promise((r) => setTimeout(r, LOST_GRACE_MS));
          await endpoint.close();
          throw why;
        }
        log.info(`[mcp] ${why}: stopping`);
        await endpoint.close();
      } finally {
        await engine.close();
      }
    },
  },
  mcp: {
    summary: 'serve MCP over stdio (relays to the store’s owner if one is running, else owns the store)',
    usage: 'waypoint mcp [--agent-rollback ask|allow|deny] [--wait SECONDS] [--verbose]',
    options: { 'agent-rollback': s, wait: s, verbose: b },
    async run(c) {
      const wait = intOption(c.values, 'wait');
      await runStdio({ workspace: c.workspace, log: stderrLogger(c.values.verbose === true), agentRollback: rollbackPolicy(c), waitMs: wait === undefined ? undefined : wait * 1000 });
    },
  },
  'connect claude-code': connect('claude-code'),
  'connect cursor': connect('cursor'),
  'connect codex': connect('codex'),
  'connect vscode': connect('vscode'),
  'connect copilot-cli': connect('copilot-cli'),
  'connect gemini-cli': connect('gemini-cli'),
  'connect cline': connect('cline'),
  'connect qwen-code': connect('qwen-code'),
  'connect opencode': connect('opencode'),
  ...Object.fromEntries(HOOK_AGENT_NAMES.map((agent) => [`hook ${agent}`, hookCommand(agent)])),
};

/**
 * `waypoint hook <agent>`: one hook event (JSON on stdin) of that agent, recorded. It
 * never blocks the agent: it always exits 0 (exit 2 means "block" to Claude Code, VS Code,
 * Codex and Gemini CLI), prints only the agent's neutral answer on stdout, and says on
 * stderr (and in .waypoint/hooks.log) what it could not record.
 */
function hookCommand(agent: HookAgent): Command {
  return {
    summary: `record one ${HOOK_AGENTS[agent].label} hook event (JSON on stdin); never blocks the agent, always exits 0`,
    usage: `waypoint hook ${agent} [--wait SECONDS]`,
    options: { wait: s },
    async run(c) {
      try {
        const text = prereadHookInput ?? (await readHookInput());
        let payload: unknown;
        try {
          payload = JSON.parse(text);
        } catch (e) {
          throw new WaypointError('invalid_input', `hook input is not JSON: ${errorMessage(e)}`);
        }
        const log = new Logger((level, line) => {
          if (level === 'warn' || level === 'error') hookLog(c.workspace, line);
        });
        await resolveStore({
          workspace: c.workspace,
          log,
          waitMs: (intOption(c.values, 'wait') ?? 20) * 1000,
          ...awaitStartingOwnerOf(c.workspace, c.teamStore),
          serving: async (d, _lock, claim) => {
            const url = new URL(HOOK_AGENTS[agent].route, d.url);
            const res = await postLoopback(url, { ...claim, authorization: `Bearer ${d.token}`, 'content-type': 'application/json' }, text, { timeoutMs: 20_000, connectTimeoutMs: DEFAULT_RPC_CONNECT_TIMEOUT_MS });
            const body = res.text;
            // Reached the owner: whatever it says is final (retrying a refusal would only repeat it).
            if (res.status !== 200) hookLog(c.workspace, `not recorded: the owner answered ${res.status}: ${body.slice(0, 500)}`);
            else {
              const out = JSON.parse(body) as { ok?: boolean; error?: string };
              if (out.ok === false) hookLog(c.workspace, `not recorded: ${out.error ?? 'refused by the owner'}`);
            }
          },
          own: async (engine) => {
            try {
              await handleHook(engine, agent, payload, { log: log.child('hooks') });
            } finally {
              // The first hook of a session with no owner: a background owner answers the next ones
              // (started before the close, which its own start overlaps; it waits for the lock).
              await closeStartingOwner(engine, c.teamStore);
            }
          },
        });
      } catch (e) {
        hookLog(c.workspace, `not recorded: ${errorMessage(e)}`);
      }
      if (HOOK_AGENTS[agent].stdout) process.stdout.write(`${HOOK_AGENTS[agent].stdout}\n`);
    },
  };
}
