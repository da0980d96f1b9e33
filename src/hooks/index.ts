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
 */
export function handleHook(engine: Engine, agent: HookAgent, raw: unknown, opts: { log?: Logger } = {}): Promise<HookResult> {
  const envelope = { ...ADAPTERS[agent](raw), digest: createHash('sha256').update(JSON.stringify(raw)).digest('hex').slice(0, 32) };
  return recordHook({ api: localApi(engine), storeDir: engine.storeDir, workspace: engine.workspace, roots: engine.workspaceSnapshots?.roots, agent, agentLabel: HOOK_AGENTS[agent].label, log: opts.log }, envelope);
}

export type { HookResult };
