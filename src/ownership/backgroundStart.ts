import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import type { Logger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { writeFileAtomicSync } from '../core/store/fsutil';
import { findOwner } from './discovery';

/**
 * The background owner: where agents run without an editor (a terminal, SSH, CI), the
 * first hook or CLI call in a workspace nobody owns does its work and then starts a
 * small detached owner for it, as git's `core.fsmonitor` starts `git fsmonitor--daemon`.
 * It owns the store like `waypoint serve` (the same lock, fencing and discovery, so two
 * racing first calls end with one owner), watches the tree so later checkpoints scan only
 * what changed, and leaves after an idle period or when a window or `serve` asks for the
 * store.
 *
 * This module decides whether one is wanted and starts it; the owner itself is
 * src/mcp/backgroundOwner.ts.
 */

/** The lock's owner id prefix of a background owner: how a window knows it may ask for the store. */
export const BACKGROUND_OWNER_KIND = 'waypoint-background';
/** Set in the spawned owner's environment: the command refuses to run without it (it is not for people). */
export const BACKGROUND_OWNER_ENV = 'WAYPOINT_BACKGROUND_OWNER';
/** The background owner's own routes on its endpoint: how it is (`waypoint status`) and "give the store up" (a window that opened). */
export const STATUS_PATH = '/owner/status';
export const HANDOVER_PATH = '/owner/handover';

export function isBackgroundOwner(lock: { ownerId: string }): boolean {
  return lock.ownerId.startsWith(`${BACKGROUND_OWNER_KIND}:`);
}
export const DEFAULT_BACKGROUND_IDLE_MS = 5 * 60_000;
/** How long a caller waits for the owner it started to serve before it does the work itself. */
const START_WAIT_MS = 15_000;
/** A start marker older than this names a start that died. */
const START_STALE_MS = 30_000;

/** `.waypoint/background-owner.json`: the window's `waypoint.backgroundOwner.*` settings, for processes that cannot read them. */
export const BackgroundSettings = z.object({
  enabled: z.boolean().optional(),
  idleMinutes: z.number().min(0.05).max(24 * 60).optional(),
});
export type BackgroundSettings = z.infer<typeof BackgroundSettings>;

export const SETTINGS_FILE = 'background-owner.json';
export const START_FILE = 'background-owner.starting';
/** Written by an owner that gave the store to a window: no new background owner is started for a while. */
export const YIELDED_FILE = 'background-owner.yielded';
const YIELDED_MS = 20_000;
export const LOG_FILE = 'background-owner.log';

export function readBackgroundSettings(storeDir: string): BackgroundSettings {
  try {
    return BackgroundSettings.parse(JSON.parse(fs.readFileSync(path.join(storeDir, SETTINGS_FILE), 'utf8')));
  } catch {
    return {};
  }
}

export function writeBackgroundSettings(storeDir: string, s: BackgroundSettings): void {
  const file = path.join(storeDir, SETTINGS_FILE);
  const text = JSON.stringify(BackgroundSettings.parse(s)) + '\n';
  // Only when it changed: a window writes it at every start.
  try {
    if (fs.readFileSync(file, 'utf8') === text) return;
  } catch {
    // not there yet
  }
  writeFileAtomicSync(file, text, 0o600);
}

/** Whether a background owner may be started here, and if not, why. */
export function backgroundOwnerWanted(storeDir: string, env: NodeJS.ProcessEnv = process.env): { on: true; idleMs: number } | { on: false; why: string } {
  const off = env.WAYPOINT_NO_DAEMON;
  if (off && off !== '0' && off.toLowerCase() !== 'false') return { on: false, why: 'WAYPOINT_NO_DAEMON is set' };
  const on = env.WAYPOINT_DAEMON;
  const shellSays = on === undefined || on === '' ? null : on === '0' || on.toLowerCase() === 'false' ? false : true;
  if (shellSays === false) return { on: false, why: 'WAYPOINT_DAEMON is 0' };
  const s = readBackgroundSettings(storeDir);
  // On by default; the shell's WAYPOINT_DAEMON=1 wins over a setting a window recorded as off.
  if (shellSays === null && s.enabled === false) return { on: false, why: 'the waypoint.backgroundOwner.enabled setting is off' };
  const envIdle = Number(env.WAYPOINT_DAEMON_IDLE_SECONDS);
  const idleMs = Number.isFinite(envIdle) && envIdle > 0 ? envIdle * 1000 : s.idleMinutes !== undefined ? s.idleMinutes * 60_000 : DEFAULT_BACKGROUND_IDLE_MS;
  return { on: true, idleMs };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readStart(file: string): { pid: number; at: number } | null {
  try {
    const st = fs.statSync(file);
    const pid = Number(fs.readFileSync(file, 'utf8').trim());
    return { pid: Number.isInteger(pid) && pid > 0 ? pid : 0, at: st.mtimeMs };
  } catch {
    return null;
  }
}

export interface StartOptions {
  workspace: string;
  storeDir: string;
  /** dist/cli.js: the executable the owner runs as. */
  cliPath: string;
  log: Logger;
}

/** How long a background owner started by a call waits for that call to release the store. */
export const AFTER_CALL_LOCK_WAIT_MS = 15_000;
/** Set in the spawned owner's environment: how long it waits for the store's lock (the call that started it still holds it). */
export const LOCK_WAIT_ENV = 'WAYPOINT_BACKGROUND_LOCK_WAIT_MS';

/**
 * A background owner that another call started and that is not serving yet: waits
 * until it serves (or its start is over) and returns true, so the caller looks for an
 * owner again; false when no start is under way (the caller owns the store itself).
 */
export async function awaitStartingOwner(o: Pick<StartOptions, 'storeDir'>): Promise<boolean> {
  const startFile = path.join(o.storeDir, START_FILE);
  const s = readStart(startFile);
  if (!s) return false;
  if (Date.now() - s.at >= START_STALE_MS || (s.pid !== 0 && !isAlive(s.pid))) {
    fs.rmSync(startFile, { force: true });
    return false;
  }
  return waitForOwner(o, startFile);
}

/**
 * Starts a background owner for the store this call has just used and is about to
 * release (the owner waits for the lock, so its own start overlaps the call's close),
 * unless none is wanted or one is starting already; does not wait for it. The call that found
 * nobody did its own work first (a fresh process's scan costs less than an owner's start
 * plus its first full scan), and the owner, once it has the store, scans the tree once
 * while watching it, so the next call's checkpoint looks only at what changed.
 */
export function startBackgroundOwnerAfter(o: StartOptions): boolean {
  const wanted = backgroundOwnerWanted(o.storeDir);
  if (!wanted.on || !fs.existsSync(o.cliPath)) return false;
  try {
    const y = fs.statSync(path.join(o.storeDir, YIELDED_FILE), { throwIfNoEntry: false });
    // A window was just given the store: it takes it in a moment; do not race it with a new background owner.
    if (y && Date.now() - y.mtimeMs < YIELDED_MS) return false;
    if (!fs.existsSync(o.storeDir)) return false;
  } catch {
    return false;
  }
  const startFile = path.join(o.storeDir, START_FILE);
  let fd: number;
  try {
    // One starter per workspace: of two calls ending together, one starts the owner.
    fd = fs.openSync(startFile, 'wx', 0o600);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return false;
    const s = readStart(startFile);
    if (s && Date.now() - s.at < START_STALE_MS && (s.pid === 0 || isAlive(s.pid))) return false;
    fs.rmSync(startFile, { force: true });
    try {
      fd = fs.openSync(startFile, 'wx', 0o600);
    } catch {
      return false;
    }
  }
  try {
    const logFile = path.join(o.storeDir, LOG_FILE);
    // The owner's own log, kept short: the newest start's lines are what explains it.
    if ((fs.statSync(logFile, { throwIfNoEntry: false })?.size ?? 0) > 1 << 20) fs.rmSync(logFile, { force: true });
    const out = fs.openSync(logFile, 'a', 0o600);
    const child = spawn(process.execPath, [o.cliPath, 'background-owner', '--workspace', o.workspace], {
      detached: true,
      stdio: ['ignore', out, out],
      cwd: o.workspace,
      env: { ...process.env, [BACKGROUND_OWNER_ENV]: '1', WAYPOINT_BACKGROUND_IDLE_MS: String(wanted.idleMs), [LOCK_WAIT_ENV]: String(AFTER_CALL_LOCK_WAIT_MS) },
      windowsHide: true,
    });
    fs.closeSync(out);
    child.unref();
    fs.writeSync(fd, String(child.pid ?? 0));
    o.log.debug(`started a background owner (pid ${child.pid}) for ${o.workspace}`);
    return true;
  } catch (e) {
    o.log.warn(`could not start a background owner: ${errorMessage(e)}`);
    fs.rmSync(startFile, { force: true });
    return false;
  } finally {
    fs.closeSync(fd);
  }
}

/** Until the owner serves, or the start is over (the owner removes the marker when it serves or fails). */
async function waitForOwner(o: Pick<StartOptions, 'storeDir'>, startFile: string): Promise<boolean> {
  const deadline = Date.now() + START_WAIT_MS;
  while (Date.now() < deadline) {
    const s = findOwner(o.storeDir);
    if (s.kind === 'serving') return true;
    const start = readStart(startFile);
    if (!start) return true;
    if (start.pid && !isAlive(start.pid)) {
      fs.rmSync(startFile, { force: true });
      return true;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}
