import * as fs from 'node:fs';
import { remoteApi } from '../core/engine/api';
import { DEFAULT_RPC_CONNECT_TIMEOUT_MS, postLoopback } from '../core/engine/loopback';
import { Logger } from '../core/log';
import { displayText } from '../core/model/displayText';
import { errorMessage } from '../core/model/errors';
import { describeOwner } from '../core/store/ownerLock';
import { BackgroundStatus, DEFAULT_BACKGROUND_MAX_RSS_BYTES, STATUS_PATH, runBackgroundOwner } from '../mcp/backgroundOwner';
import { BACKGROUND_OWNER_ENV, backgroundOwnerWanted, isBackgroundOwner } from '../ownership/backgroundStart';
import { findOwner } from '../ownership/discovery';
import { storeClaimHeaders, storeDirOf } from '../ownership/resolve';
import { UsageError } from './args';
import type { Command } from './command';

/** `waypoint status` (who owns the store, and the background owner's pid, memory and idle time) and the background owner's own command. */

const b = { type: 'boolean' as const };
const mb = (n: number) => `${Math.round(n / 2 ** 20)} MB`;
const secs = (ms: number) => (ms < 120_000 ? `${Math.round(ms / 1000)} s` : `${Math.round(ms / 60_000)} min`);

export const BACKGROUND_COMMANDS: Record<string, Command> = {
  status: {
    summary: "who owns this workspace's store now (a window, `waypoint serve`, a background owner: its pid, memory and idle time), or nobody",
    usage: 'waypoint status [--json]',
    options: {},
    async run(c) {
      const storeDir = storeDirOf(c.workspace);
      if (!fs.existsSync(storeDir)) {
        c.out(`No Waypoint store in ${c.workspace} yet.`, { owner: null, store: null });
        return;
      }
      const wanted = backgroundOwnerWanted(storeDir);
      const background = wanted.on ? { enabled: true, idleMs: wanted.idleMs } : { enabled: false, why: wanted.why };
      const s = findOwner(storeDir);
      if (s.kind === 'none') {
        const bg = wanted.on ? `the next call that opens it starts a background owner as it ends (leaves after ${secs(wanted.idleMs)} idle)` : `no background owner is started: ${wanted.why}`;
        c.out(`Nobody owns the store in ${storeDir}; ${bg}.`, { owner: null, store: storeDir, background });
        return;
      }
      const isBackground = isBackgroundOwner(s.lock);
      if (s.kind !== 'serving' || !isBackground) {
        const how = s.kind === 'serving' ? `serving ${s.discovery.url}` : s.kind === 'busy' ? 'serving no endpoint (a command mid-run, or an owner starting or stopping)' : 'for another folder';
        c.out(`The store in ${storeDir} is owned by ${describeOwner(s.lock)}, ${how}.`, { owner: { pid: s.lock.pid, ownerId: s.lock.ownerId, kind: s.kind, background: isBackground }, store: storeDir, background });
        return;
      }
      let st: BackgroundStatus;
      try {
        const res = await postLoopback(new URL(STATUS_PATH, s.discovery.url), { authorization: `Bearer ${s.discovery.token}`, 'content-type': 'application/json', ...storeClaimHeaders(storeDir) }, '{}', { timeoutMs: 5_000, connectTimeoutMs: DEFAULT_RPC_CONNECT_TIMEOUT_MS });
        if (res.status !== 200) throw new Error(`it answered ${res.status}: ${res.text.slice(0, 200)}`);
        st = BackgroundStatus.parse(JSON.parse(res.text));
      } catch (e) {
        c.out(`The store in ${storeDir} is owned by a background owner, ${describeOwner(s.lock)}, which did not say how it is (${errorMessage(e)}).`, { owner: { pid: s.lock.pid, ownerId: s.lock.ownerId, kind: s.kind, background: true }, store: storeDir });
        return;
      }
      const events = await remoteApi(s.discovery, { timeoutMs: 5_000, headers: storeClaimHeaders(storeDir) })
        .info()
        .then((i) => i.events)
        .catch(() => null);
      const warm = st.warmUp === 'running' ? '; its first scan of the tree is under way, and calls wait for it' : st.warmUp === 'skipped' ? '; the next checkpoint scans the whole tree' : '';
      const watch = st.watch.kind === 'watching' ? `watching ${st.watch.dirs} directories (${st.watch.pending} paths changed since the last checkpoint; ${st.watch.hinted ?? 0} checkpoints looked only at what it saw change${warm})` : st.watch.kind === 'scanning' ? `not watching (${st.watch.reason}): every checkpoint scans the tree` : st.watch.kind;
      c.out(
        [
          `Background owner of ${storeDir}: pid ${st.pid}, ${mb(st.rssBytes)} resident (leaves if it stays past ${mb(st.maxRssBytes)} between calls), idle ${secs(st.idleMs)} of ${secs(st.idleLimitMs)}, ${st.calls} calls since ${new Date(st.startedAt).toISOString()}${events === null ? '' : `, ${events} events`}.`,
          `It is ${watch}. Serving ${s.discovery.url}.`,
        ].join('\n'),
        { owner: { pid: s.lock.pid, ownerId: s.lock.ownerId, kind: s.kind, background: true }, store: storeDir, background, status: st },
      );
    },
  },
  'background-owner': {
    summary: 'the background owner a first call starts (not for people: it runs only when Waypoint starts it)',
    usage: 'waypoint background-owner [--verbose]',
    options: { verbose: b },
    async run(c) {
      if (process.env[BACKGROUND_OWNER_ENV] !== '1') throw new UsageError('background-owner is started by Waypoint itself when a call finds no owner; run `waypoint serve` to own a store yourself.');
      const idleMs = Number(process.env.WAYPOINT_BACKGROUND_IDLE_MS) || 5 * 60_000;
      const maxMb = Number(process.env.WAYPOINT_DAEMON_MAX_RSS_MB);
      const maxRssBytes = Number.isFinite(maxMb) && maxMb > 0 ? maxMb * 2 ** 20 : DEFAULT_BACKGROUND_MAX_RSS_BYTES;
      const graceS = Number(process.env.WAYPOINT_DAEMON_MEMORY_GRACE_SECONDS);
      const memoryGraceMs = Number.isFinite(graceS) && graceS >= 0 && process.env.WAYPOINT_DAEMON_MEMORY_GRACE_SECONDS !== '' ? graceS * 1000 : undefined;
      // Its stderr is .waypoint/background-owner.log: every line with its time.
      const log = new Logger((level, line) => {
        if (level !== 'debug' || c.values.verbose === true) process.stderr.write(`${new Date().toISOString()} ${level} ${displayText(line, { multiline: true })}\n`);
      });
      const why = await runBackgroundOwner({ workspace: c.workspace, log, idleMs, maxRssBytes, memoryGraceMs });
      c.out(`background owner stopped: ${why}`, { stopped: why });
    },
  },
};
