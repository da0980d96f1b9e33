import * as vscode from 'vscode';

/** Typed access to Waypoint's settings (package.json `contributes.configuration`). */
export interface Settings {
  storageLocation: string;
  excludes: string[];
  maxFileSizeMB: number;
  autoCheckpointQuietMs: number;
  retention: { maxCheckpointsPerTask: number; maxAgeDays: number; maxTotalMB: number };
  agentRollback: 'ask' | 'allow' | 'deny';
  leaseTtlSeconds: number;
  attentionDelayMinutes: number;
  resumeDelivery: 'ask' | 'chat' | 'terminal' | 'clipboard';
  /** The retry policy of tasks this window starts (or serves as the store's owner). */
  retry: { maxAttempts: number; backoffSeconds: number };
  alerts: AlertSettings;
  /** Always-on workspace history while no task runs (see workspaceHistory.ts). */
  history: { enabled: boolean; quietPeriodMs: number; maxMB: number; maxAgeDays: number };
  /** Terminal-name prefix → agent: commands in those terminals are the agent's. */
  agentTerminals: Record<string, string>;
  /** The background owner a CLI or hook call starts where no window owns the store (recorded in the store for them). */
  backgroundOwner: { enabled: boolean; idleMinutes: number };
}

/** When an alert fires (see alertRules.ts); 0 turns a timed one off. */
export interface AlertSettings {
  interruptedMinutes: number;
  failed: boolean;
  inDoubtMinutes: number;
  reviewHours: number;
  retriesExhausted: boolean;
}

const DEFAULTS: Settings = {
  storageLocation: '.waypoint',
  excludes: [],
  maxFileSizeMB: 5,
  autoCheckpointQuietMs: 2000,
  retention: { maxCheckpointsPerTask: 200, maxAgeDays: 30, maxTotalMB: 2000 },
  agentRollback: 'ask',
  leaseTtlSeconds: 300,
  attentionDelayMinutes: 10,
  resumeDelivery: 'ask',
  retry: { maxAttempts: 3, backoffSeconds: 1 },
  alerts: { interruptedMinutes: 10, failed: true, inDoubtMinutes: 30, reviewHours: 24, retriesExhausted: true },
  history: { enabled: true, quietPeriodMs: 5000, maxMB: 500, maxAgeDays: 14 },
  agentTerminals: { Copilot: 'copilot', 'Claude Code': 'claude-code', Codex: 'codex', Cline: 'cline' },
  backgroundOwner: { enabled: true, idleMinutes: 5 },
};

/** A number setting as the engine can take it: a hand-edited value out of range or of the wrong type falls back or is clamped. */
function num(v: unknown, fallback: number, min: number, max: number): number {
  const n = typeof v === 'number' && Number.isFinite(v) ? v : fallback;
  return Math.min(max, Math.max(min, n));
}

/** The interrupted-task threshold: the new setting, else the deprecated `attentionDelayMinutes` a person set before it existed. */
function interruptedMinutes(c: vscode.WorkspaceConfiguration): number {
  const now = c.inspect<number>('alerts.interruptedMinutes');
  const set = now?.workspaceFolderValue ?? now?.workspaceValue ?? now?.globalValue;
  if (set !== undefined) return set;
  const old = c.inspect<number>('attentionDelayMinutes');
  return old?.workspaceFolderValue ?? old?.workspaceValue ?? old?.globalValue ?? DEFAULTS.alerts.interruptedMinutes;
}

export function settings(scope?: vscode.ConfigurationScope): Settings {
  const c = vscode.workspace.getConfiguration('waypoint', scope);
  return {
    storageLocation: c.get('storageLocation', DEFAULTS.storageLocation),
    excludes: c.get('excludes', DEFAULTS.excludes),
    maxFileSizeMB: c.get('maxFileSizeMB', DEFAULTS.maxFileSizeMB),
    autoCheckpointQuietMs: c.get('autoCheckpoint.quietPeriodMs', DEFAULTS.autoCheckpointQuietMs),
    retention: {
      maxCheckpointsPerTask: c.get('retention.maxCheckpointsPerTask', DEFAULTS.retention.maxCheckpointsPerTask),
      maxAgeDays: c.get('retention.maxAgeDays', DEFAULTS.retention.maxAgeDays),
      maxTotalMB: c.get('retention.maxTotalMB', DEFAULTS.retention.maxTotalMB),
    },
    agentRollback: c.get('agentRollback', DEFAULTS.agentRollback),
    leaseTtlSeconds: c.get('leaseTtlSeconds', DEFAULTS.leaseTtlSeconds),
    attentionDelayMinutes: c.get('attentionDelayMinutes', DEFAULTS.attentionDelayMinutes),
    resumeDelivery: c.get('resumeDelivery', DEFAULTS.resumeDelivery),
    retry: {
      maxAttempts: c.get('retry.maxAttempts', DEFAULTS.retry.maxAttempts),
      backoffSeconds: c.get('retry.backoffSeconds', DEFAULTS.retry.backoffSeconds),
    },
    alerts: {
      interruptedMinutes: interruptedMinutes(c),
      failed: c.get('alerts.failed', DEFAULTS.alerts.failed),
      inDoubtMinutes: c.get('alerts.inDoubtMinutes', DEFAULTS.alerts.inDoubtMinutes),
      reviewHours: c.get('alerts.reviewHours', DEFAULTS.alerts.reviewHours),
      retriesExhausted: c.get('alerts.retriesExhausted', DEFAULTS.alerts.retriesExhausted),
    },
    history: {
      enabled: c.get('history.enabled', DEFAULTS.history.enabled) !== false,
      quietPeriodMs: num(c.get('history.quietPeriodMs'), DEFAULTS.history.quietPeriodMs, 500, 600_000),
      maxMB: num(c.get('history.maxMB'), DEFAULTS.history.maxMB, 0, 10_000_000),
      maxAgeDays: num(c.get('history.maxAgeDays'), DEFAULTS.history.maxAgeDays, 0, 36_500),
    },
    agentTerminals: agentTerminals(c.get('terminal.agentTerminals')),
    backgroundOwner: {
      enabled: c.get<boolean>('backgroundOwner.enabled', DEFAULTS.backgroundOwner.enabled) !== false,
      idleMinutes: num(c.get('backgroundOwner.idleMinutes'), DEFAULTS.backgroundOwner.idleMinutes, 0.05, 1440),
    },
  };
}

/** The engine's retry policy from the settings, bounded as the engine's input schema bounds it (a hand-edited value never fails a start). */
export function retryPolicySetting(s: Settings = settings()): { maxAttempts: number; backoffMs: number } {
  const maxAttempts = Math.min(100, Math.max(1, Math.round(Number(s.retry.maxAttempts) || 3)));
  const backoffMs = Math.min(3_600_000, Math.max(0, Math.round((Number(s.retry.backoffSeconds) || 0) * 1000)));
  return { maxAttempts, backoffMs };
}

/** Only string → string entries count: a hand-edited value of another shape is ignored, not fatal. */
function agentTerminals(v: unknown): Record<string, string> {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return { ...DEFAULTS.agentTerminals };
  return Object.fromEntries(Object.entries(v as Record<string, unknown>).filter((e): e is [string, string] => typeof e[1] === 'string' && e[0].length > 0 && e[1].length > 0));
}
