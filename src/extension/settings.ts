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
};

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
  };
}
