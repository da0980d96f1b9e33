import { createHash } from 'node:crypto';
import type { Engine } from '../core/engine/engine';
import { localApi } from '../core/engine/api';
import type { Logger } from '../core/log';
import { HOOK_AGENTS, type HookAgent } from './agents';
import type { HookAdapter } from './events';
import { claudeCodeAdapter } from './adapters/claudeCode';
import { clineAdapter } from './adapters/cline';
import { codexAdapter } from './adapters/codex';
import { cursorAdapter } from './adapters/cursor';
import { geminiAdapter } from './adapters/gemini';
import { opencodeAdapter } from './adapters/opencode';
import { qwenCodeAdapter } from './adapters/qwenCode';
import { copilotCliAdapter, vscodeAdapter } from './adapters/vscode';
import { recordHook, type HookResult } from './recorder';

/** Each agent's documented payloads → the recorder's events. */
export const ADAPTERS: Record<HookAgent, HookAdapter> = {
  'claude-code': claudeCodeAdapter,
  vscode: vscodeAdapter,
  'copilot-cli': copilotCliAdapter,
  cursor: cursorAdapter,
  'gemini-cli': geminiAdapter,
  codex: codexAdapter,
  cline: clineAdapter,
  'qwen-code': qwenCodeAdapter,
  opencode: opencodeAdapter,
};

/**
 * One hook event of `agent`, recorded in this process's engine (the owner's). A
 * malformed payload is an `invalid_input` error before anything is recorded.
 *
 * A session's events are recorded one after another, in the order they reached the
 * owner: most agents wait for each hook, but Cline does not wait for TaskStart, so its
 * first PreToolUse can arrive while the start is still being recorded, and both read and
 * write the session's state.
 */
export function handleHook(engine: Engine, agent: HookAgent, raw: unknown, opts: { log?: Logger } = {}): Promise<HookResult> {
  const envelope = { ...ADAPTERS[agent](raw), digest: createHash('sha256').update(JSON.stringify(raw)).digest('hex').slice(0, 32) };
  return inSessionOrder(`${engine.storeDir}\0${agent}\0${envelope.sessionId}`, () =>
    recordHook({ api: localApi(engine), storeDir: engine.storeDir, workspace: engine.workspace, roots: engine.workspaceSnapshots?.roots, agent, agentLabel: HOOK_AGENTS[agent].label, log: opts.log }, envelope),
  );
}

/** The last recording of each session still running in this process (gone once it settles). */
const sessionTails = new Map<string, Promise<unknown>>();

function inSessionOrder<T>(key: string, record: () => Promise<T>): Promise<T> {
  const run = (sessionTails.get(key) ?? Promise.resolve()).then(record, record);
  const tail = run.then(
    () => undefined,
    () => undefined,
  );
  sessionTails.set(key, tail);
  void tail.then(() => {
    if (sessionTails.get(key) === tail) sessionTails.delete(key);
  });
  return run;
}

export type { HookResult };
