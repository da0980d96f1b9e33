import { randomUUID } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { Engine } from '../core/engine/engine';
import type { Logger } from '../core/log';
import { errorMessage } from '../core/model/errors';
import { TreeWatcher, type WatchState } from '../core/snapshot/treeWatcher';
import { BACKGROUND_OWNER_KIND, HANDOVER_PATH, LOCK_WAIT_ENV, START_FILE, STATUS_PATH, YIELDED_FILE } from '../ownership/backgroundStart';
import { storeLocationOf } from '../ownership/resolve';
import { removeDiscovery } from '../ownership/discovery';
import { headlessRollback } from './headlessRollback';
import { startOwnerEndpoint } from './owner';

/**
 * The background owner's process (see src/ownership/backgroundStart.ts for when it is
 * started): it owns the store like `waypoint serve`, with a tree watcher feeding every
 * checkpoint what changed, and two more routes on its endpoint — its status (for
 * `waypoint status`) and the hand-over a VS Code window asks for when it opens. It
 * leaves when it has answered nothing for the idle period, when its memory passes its
 * bound, when a window asks for the store, or when it is replaced; it always leaves
 * the way any owner does (calls in flight answered, the store closed and its lock
 * released), so whoever comes next replays everything it acknowledged.
 */
export { STATUS_PATH, HANDOVER_PATH };

export const BackgroundStatus = z.object({
  pid: z.number().int(),
  startedAt: z.number(),
  rssBytes: z.number(),
  heapUsedBytes: z.number(),
  maxRssBytes: z.number(),
  idleMs: z.number(),
  idleLimitMs: z.number(),
  calls: z.number().int(),
  watch: z.object({ kind: z.string(), dirs: z.number().optional(), reason: z.string().optional(), pending: z.number().int(), hinted: z.number().int().optional() }),
  /** The watcher's first scan (see Engine.warmUpChangeFeed): under way, done in `warmUpMs`, or not possible (the next checkpoint scans everything). */
  warmUp: z.enum(['running', 'done', 'skipped']).optional(),
  warmUpMs: z.number().optional(),
});
export type BackgroundStatus = z.infer<typeof BackgroundStatus>;

export type StopReason = 'idle' | 'handover' | 'memory' | 'lost' | 'signal';

export interface BackgroundOwnerOptions {
  workspace: string;
  log: Logger;
  idleMs: number;
  /** Past this resident size, the owner leaves once it is between calls (the next call starts a fresh one). */
  maxRssBytes: number;
  /** How often idleness and memory are looked at. */
  checkMs?: number;
  /**
   * How long the resident size may stay past `maxRssBytes`, between calls, before the
   * owner leaves. A first checkpoint of a large tree peaks well above where the owner
   * settles (200,000 files: past 512 MB during the capture, ~270 MB a minute later, once
   * its stat workers have ended and the collector has run); leaving at the peak would make
   * every call start a fresh owner that peaks again.
   */
  memoryGraceMs?: number;
}

export const DEFAULT_BACKGROUND_MEMORY_GRACE_MS = 90_000;

export const DEFAULT_BACKGROUND_MAX_RSS_BYTES = 512 * 1024 * 1024;

function lockWaitMs(): number {
  const ms = Number(process.env[LOCK_WAIT_ENV]);
  return Number.isFinite(ms) && ms > 0 ? Math.min(ms, 60_000) : 0;
}

export async function runBackgroundOwner(o: BackgroundOwnerOptions): Promise<StopReason | 'not-started'> {
  const log = o.log;
  const at = storeLocationOf(o.workspace);
  const startFile = path.join(at.storeDir, START_FILE);
  const roots = at.roots ?? [{ name: path.basename(at.workspace) || 'workspace', dir: at.workspace }];
  // Checkpoints scan only what the watcher saw change; WAYPOINT_WATCH_HINTS=0 makes every one a full scan (the watcher then only counts).
  const watcher = new TreeWatcher({ roots, storeDir: at.storeDir, log: log.child('watch'), hints: process.env.WAYPOINT_WATCH_HINTS !== '0' });
  let engine: Engine;
  try {
    engine = await Engine.open({
      workspace: at.workspace,
      storeDir: at.storeDir,
      ...(at.roots ? { snapshots: { roots: at.roots } } : {}),
      log,
      sweepIntervalMs: 5_000,
      changeFeed: watcher,
      // Started by a call that owned the store: it waits for that call to release it.
      store: { lock: { waitMs: lockWaitMs(), ownerId: `${BACKGROUND_OWNER_KIND}:${randomUUID()}` } },
    });
  } catch (e) {
    // Another process owns it (a racing start, a window, a CLI command): nothing to do.
    fs.rmSync(startFile, { force: true });
    log.info(`not starting: ${errorMessage(e)}`);
    return 'not-started';
  }
  const startedAt = Date.now();
  let lastCall = Date.now();
  let inFlight = 0;
  let calls = 0;
  // A window asked for the store (see HANDOVER_PATH).
  let handingOver = false;
  let stopWith: ((r: StopReason) => void) | undefined;
  const stopped = new Promise<StopReason>((resolve) => (stopWith = resolve));
  const stop = (r: StopReason) => stopWith?.(r);
  let endpoint: Awaited<ReturnType<typeof startOwnerEndpoint>> | undefined;
  let warmUp: BackgroundStatus['warmUp'] = 'running';
  let warmUpMs: number | undefined;
  const timers: NodeJS.Timeout[] = [];
  try {
    // Before the endpoint: the first checkpoint it serves is a full scan, and every later one is vouched for.
    watcher.start();
    const status = (): BackgroundStatus => {
      const m = process.memoryUsage();
      const w: WatchState = watcher.state;
      return {
        pid: process.pid,
        startedAt,
        rssBytes: m.rss,
        heapUsedBytes: m.heapUsed,
        maxRssBytes: o.maxRssBytes,
        idleMs: inFlight > 0 ? 0 : Date.now() - lastCall,
        idleLimitMs: o.idleMs,
        calls,
        watch: { kind: w.kind, ...(w.kind === 'watching' ? { dirs: w.dirs } : {}), ...(w.kind === 'scanning' ? { reason: w.reason } : {}), pending: watcher.pendingCount, hinted: watcher.hintedCheckpoints },
        warmUp,
        ...(warmUpMs !== undefined ? { warmUpMs } : {}),
      };
    };
    endpoint = await startOwnerEndpoint({
      engine,
      log,
      rollback: headlessRollback(engine),
      routes: {
        [STATUS_PATH]: async () => status(),
        [HANDOVER_PATH]: async () => {
          // A window that opened takes the store: no new background owner races it for a while.
          fs.writeFileSync(path.join(at.storeDir, YIELDED_FILE), String(process.pid), { mode: 0o600 });
          log.info('a VS Code window asked for the store: handing it over');
          handingOver = true;
          setImmediate(() => stop('handover'));
          return { ok: true, pid: process.pid };
        },
      },
      // Every answered call (an RPC, a hook, an MCP message) keeps the owner alive.
      onCall: (phase) => {
        if (phase === 'start') {
          inFlight++;
          calls++;
        } else inFlight--;
        lastCall = Date.now();
      },
    });
    fs.rmSync(startFile, { force: true });
    // The watcher's one full scan, in the engine's runner (a call that comes meanwhile waits
    // for it): from then on a checkpoint after the newest one looks only at what changed.
    const warm = Date.now();
    void engine.warmUpChangeFeed().then(
      (ok) => {
        warmUp = ok ? 'done' : 'skipped';
        warmUpMs = Date.now() - warm;
        log.info(ok ? `watching since the newest checkpoint (first scan ${warmUpMs} ms)` : 'the first checkpoint asked of this owner scans the whole tree');
      },
      (e) => {
        warmUp = 'skipped';
        log.warn(`the watcher's first scan failed: ${errorMessage(e)}`);
      },
    );
    const w = watcher.state;
    log.info(`serving ${at.workspace} at ${endpoint.http.url} (pid ${process.pid}; ${w.kind === 'watching' ? `watching ${w.dirs} directories` : w.kind === 'scanning' ? `scanning: ${w.reason}` : w.kind}; leaves after ${Math.round(o.idleMs / 1000)} s idle)`);
    const lost = engine.eventLog.onDidLoseOwnership(() => stop('lost'));
    let overSince: number | null = null;
    const grace = o.memoryGraceMs ?? DEFAULT_BACKGROUND_MEMORY_GRACE_MS;
    const check = setInterval(
      () => {
        if (inFlight > 0) return;
        if (Date.now() - lastCall >= o.idleMs) return stop('idle');
        if (process.memoryUsage.rss() <= o.maxRssBytes) overSince = null;
        else if (overSince === null) overSince = Date.now();
        else if (Date.now() - overSince >= grace) stop('memory');
      },
      o.checkMs ?? Math.max(100, Math.min(5_000, Math.floor(o.idleMs / 4))),
    );
    timers.push(check);
    const onSignal = () => stop('signal');
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    const why = await stopped;
    lost.dispose();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    log.info(
      why === 'idle'
        ? `no call for ${Math.round(o.idleMs / 1000)} s: leaving`
        : why === 'memory'
          ? `resident memory past ${Math.round(o.maxRssBytes / 2 ** 20)} MB for ${Math.round(grace / 1000)} s between calls: leaving (the next call starts a fresh owner)`
          : why === 'lost'
            ? 'replaced as the owner: leaving'
            : why === 'signal'
              ? 'stopped by a signal'
              : 'handed the store over',
    );
    return why;
  } finally {
    for (const t of timers) clearInterval(t);
    watcher.close();
    // Stop being found first, then let the calls in flight finish (closing the server cuts
    // its connections, and a cut call's caller could not tell whether it was recorded),
    // then the endpoint, then the store (its lock released: the next owner replays it all).
    if (endpoint) removeDiscovery(at.storeDir, endpoint.http.token);
    for (const until = Date.now() + 30_000; inFlight > 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 20));
    await endpoint?.close().catch((e) => log.warn(`closing the endpoint: ${errorMessage(e)}`));
    // Handed over: a compression under way stops, and the new owner does it (it does not wait for ours).
    await engine.close({ leaveRawContent: handingOver }).catch((e) => log.warn(`closing the store: ${errorMessage(e)}`));
    fs.rmSync(startFile, { force: true });
  }
}
