import * as vscode from 'vscode';

/** Typed access to Waypoint's settings (package.json `contributes.configuration`). */
export interface Settings {
  storageLocation: string;
  leaseTtlSeconds: number;
  attentionDelayMinutes: number;
  resumeDelivery: 'ask' | 'chat' | 'terminal' | 'clipboard';
}

const DEFAULTS: Settings = { storageLocation: '.waypoint', leaseTtlSeconds: 300, attentionDelayMinutes: 10, resumeDelivery: 'ask' };

export function settings(scope?: vscode.ConfigurationScope): Settings {
  const c = vscode.workspace.getConfiguration('waypoint', scope);
  return {
    storageLocation: c.get('storageLocation', DEFAULTS.storageLocation),
    leaseTtlSeconds: c.get('leaseTtlSeconds', DEFAULTS.leaseTtlSeconds),
    attentionDelayMinutes: c.get('attentionDelayMinutes', DEFAULTS.attentionDelayMinutes),
    resumeDelivery: c.get('resumeDelivery', DEFAULTS.resumeDelivery),
  };
}
