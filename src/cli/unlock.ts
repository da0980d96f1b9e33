import * as fs from 'node:fs';
import * as os from 'node:os';
import { RpcTransportError, remoteApi } from '../core/engine/api';
import { WaypointError, errorMessage } from '../core/model/errors';
import { isPidAlive } from '../core/store/fsutil';
import { isAbsurdLease, isStale } from '../core/store/lockFile';
import { describeOwner, expireLock, readLock, type LockInfo } from '../core/store/ownerLock';
import { findOwner, storeDirOf } from '../ownership/discovery';
import type { Command } from './command';

/** How long a local owner has to answer before it counts as not answering. */
const ANSWER_TIMEOUT_MS = 5_000;

/** Why the lock's holder could not be shown to be alive here. */
type Holder = 'another machine' | 'gone' | 'not answering' | 'expired' | 'unreadable';

const WHY: Record<Holder, string> = {
  'another machine': 'it was held from another machine, which this one cannot check',
  gone: 'its process is no longer running',
  'not answering': 'its process still runs here but did not answer; it accepts no more writes and gives way to the next owner',
  expired: 'its lease had run out (or was impossibly long), so it held nothing',
  unreadable: 'its content could not be read, so it held nothing',
};

/**
 * `waypoint unlock`: frees a store whose owner.lock nothing here can prove alive — a
 * lock that came with a copied folder, another machine's, a process gone or hung. It
 * refuses while the lock's holder runs on this machine and answers (that is the owner:
 * close it instead). The lock's lease is ended rather than the file deleted, so the
 * holder is fenced and the next command takes the store over cleanly (see expireLock).
 */
export const UNLOCK_COMMANDS: Record<string, Command> = {
  unlock: {
    summary: 'free a store whose owner.lock names a process that is gone, hung or on another machine (refused while its owner runs here and answers)',
    usage: 'waypoint unlock',
    options: {},
    async run(c) {
      const dir = storeDirOf(c.workspace);
      if (!fs.existsSync(dir)) throw new WaypointError('not_found', `There is no Waypoint store in ${dir}; nothing to unlock.`);
      // Refuses a linked store (a hostile clone) before its lock is read or rewritten.
      const status = findOwner(dir);
      const seen = readLock(dir);
      if (seen.text === null) {
        c.out(`The Waypoint store in ${dir} is not locked; nothing to unlock.`, { storeDir: dir, unlocked: null });
        return;
      }
      const info: LockInfo | null = seen.info;
      let holder: Holder;
      let silence = '';
      if (!info) holder = 'unreadable';
      else if (info.host !== os.hostname()) holder = isAbsurdLease(seen) ? 'expired' : 'another machine';
      else if (!isPidAlive(info.pid)) holder = 'gone';
      else if (isStale(seen)) holder = 'expired';
      else {
        holder = 'not answering';
        if (status.kind === 'serving' && status.lock.pid === info.pid) {
          let answered = false;
          try {
            await remoteApi(status.discovery, { timeoutMs: ANSWER_TIMEOUT_MS }).info();
            answered = true;
          } catch (e) {
            // Any answer, a refusal included, shows a live owner; only silence does not.
            if (e instanceof RpcTransportError) silence = errorMessage(e);
            else answered = true;
          }
          if (answered) {
            throw new WaypointError(
              'locked',
              `The Waypoint store in ${dir} is owned by ${describeOwner(info, seen)}, which is running and answering at ${status.discovery.url}: it is not stuck. Other commands talk to it; to free the store, close that process (its VS Code window, 'waypoint serve' or 'waypoint mcp'). Nothing was changed.`,
              { owner: info },
            );
          }
        }
      }
      const done = expireLock(dir, seen.text);
      if (done === 'busy' || done === 'changed') {
        throw new WaypointError('locked', `Another process is taking the Waypoint store in ${dir} over right now; run 'waypoint unlock' again if it stays locked. Nothing was changed.`);
      }
      const whose = info ? `the lock of ${describeOwner(info, seen, { unlockHint: false })}` : 'an unreadable owner.lock';
      const why = silence ? `${WHY[holder]} (${silence})` : WHY[holder];
      c.out(`Unlocked the Waypoint store in ${dir}: removed ${whose}; ${why}. The next command owns the store.`, { storeDir: dir, unlocked: info, holder });
    },
  },
};
