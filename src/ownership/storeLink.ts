import type { Engine, ChangeEvent } from '../core/engine/engine';
import { RPC_METHODS, localApi, remoteApi, type EngineApi, type RpcMethod } from '../core/engine/api';
import type { Logger } from '../core/log';
import { WaypointError, errorMessage, isWaypointError } from '../core/model/errors';
import type { WaypointEvent } from '../core/model/schema';
import { describeOwner, type LockInfo } from '../core/store/ownerLock';
import type { Discovery } from './discovery';
import { ownOrRelay, type StoreDecision } from './ownOrRelay';
import { isBackgroundOwner } from './backgroundStart';
import { askBackgroundOwnerForStore } from './handover';

/**
 * A long-lived process's link to a workspace's store (the extension host of one
 * window): it owns the store when it can, and otherwise relays every call to the
 * process that does, watching that owner so that when it goes away (its process
 * exits, or its lease expires because it hangs) this process takes the store over
 * and carries on in-process, without a restart.
 *
 * While relaying it polls, once per `pollMs`, two cheap things: the owner lock on
 * disk (is the owner still alive and still the same?) and the owner's event count
 * over `/rpc` `info`; when the count grew it fetches the new events and re-emits
 * them as change events, shaped exactly like the in-process engine's, so surfaces
 * refresh the same way in both modes. Polling rather than a push feed because the
 * owner's endpoint is request/response only, the question "is the owner still
 * there?" has to be asked on a timer anyway (a SIGKILLed owner says nothing), and
 * one small loopback request a second costs nothing measurable.
 *
 * Nothing acknowledged is lost across the switch: a call the owner answered is
 * durable in its journal before it answered, and taking over replays that journal.
 * A call in flight when the owner died fails with an `io` error (it was never
 * acknowledged), and calls made after the switch go to the in-process engine.
 */
export type LinkMode =
  | { kind: 'starting' }
  | { kind: 'owner'; engine: Engine }
  | { kind: 'relay'; owner: LockInfo; discovery: Discovery; api: EngineApi; /** The same, with a timeout, for the watcher's polls. */ poll: EngineApi }
  /** Held by a live process that serves no endpoint (a CLI command mid-run, an owner starting or stopping). */
  | { kind: 'waiting'; reason: string }
  | { kind: 'closed' };

export interface StoreLinkOptions {
  storeDir: string;
  log: Logger;
  /** Opens the store in-process; must reject with code `locked` quickly when another process holds it. */
  openEngine(): Promise<Engine>;
  /** How often a relay checks its owner and fetches new events. */
  pollMs?: number;
  /**
   * Ask a background owner (one a CLI or hook call started, see backgroundStart.ts) for the
   * store instead of relaying to it: a window is the better owner while it is open.
   */
  takeFromBackground?: boolean;
}

export const DEFAULT_RELAY_POLL_MS = 1_000;
/** Events fetched per poll; a bigger backlog is read over the next polls. */
const EVENTS_PER_POLL = 500;

type Listener<T> = (e: T) => void;

export class StoreLink {
  private modeNow: LinkMode = { kind: 'starting' };
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private lastSeq = 0;
  /** Until then, look every 50 ms: a background owner is handing the store over. */
  private handoverUntil = 0;
  private ownerApi: EngineApi | undefined;
  private engineSub: { dispose(): void } | undefined;
  private readonly modeListeners = new Set<Listener<LinkMode>>();
  private readonly changeListeners = new Set<Listener<ChangeEvent | undefined>>();
  private readonly settledWaiters = new Set<() => void>();
  private readonly log: Logger;
  readonly pollMs: number;
  /** A poll the owner does not answer in this time is dropped, so a hung owner cannot stall the watcher past its lease. */
  private readonly pollTimeoutMs: number;
  /** The engine API that always goes where the store currently is (in-process or the owner). */
  readonly api: EngineApi;

  constructor(private readonly opts: StoreLinkOptions) {
    this.log = opts.log.child('link');
    this.pollMs = opts.pollMs ?? DEFAULT_RELAY_POLL_MS;
    this.pollTimeoutMs = Math.max(2_000, this.pollMs * 3);
    this.api = this.routedApi();
  }

  get mode(): LinkMode {
    return this.modeNow;
  }

  /** The in-process engine while this process owns the store. */
  get engine(): Engine | undefined {
    return this.modeNow.kind === 'owner' ? this.modeNow.engine : undefined;
  }

  onDidChangeMode(l: Listener<LinkMode>): { dispose(): void } {
    this.modeListeners.add(l);
    return { dispose: () => this.modeListeners.delete(l) };
  }

  /** Store changes in either mode; `undefined` means "everything may have changed" (a mode switch). */
  onDidChange(l: Listener<ChangeEvent | undefined>): { dispose(): void } {
    this.changeListeners.add(l);
    return { dispose: () => this.changeListeners.delete(l) };
  }

  /** Starts resolving (own or relay) and keeps watching while relaying. Idempotent. */
  start(): void {
    if (this.timer || this.modeNow.kind === 'closed') return;
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.pollMs);
    this.timer.unref();
  }

  /**
   * Resolves once the link owns or relays; rejects with a `locked` error naming the
   * holder if the store stays held by a process without an endpoint for `waitMs`.
   */
  async ready(waitMs = 10_000): Promise<Exclude<LinkMode, { kind: 'starting' | 'waiting' | 'closed' }>> {
    this.start();
    const deadline = Date.now() + waitMs;
    for (;;) {
      const m = this.modeNow;
      if (m.kind === 'owner' || m.kind === 'relay') return m;
      if (m.kind === 'closed') throw new WaypointError('io', 'The Waypoint store link is closed.');
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new WaypointError('locked', m.kind === 'waiting' ? `Cannot reach the Waypoint store: ${m.reason}.` : 'The Waypoint store did not open in time.');
      }
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(t);
          this.settledWaiters.delete(done);
          resolve();
        };
        const t = setTimeout(done, Math.min(left, this.pollMs));
        this.settledWaiters.add(done);
      });
    }
  }

  /** One look at the store: own it if free, follow a new owner, or pull the current owner's new events. */
  tick(): Promise<void> {
    this.ticking ??= this.look()
      .catch((e) => this.log.warn(`checking the store's owner failed: ${errorMessage(e)}`))
      .finally(() => (this.ticking = undefined));
    return this.ticking;
  }

  private async look(): Promise<void> {
    const m = this.modeNow;
    if (m.kind === 'owner' || m.kind === 'closed') return;
    let s: StoreDecision;
    try {
      s = ownOrRelay(this.opts.storeDir, this.log);
    } catch (e) {
      // A store that is (or holds) a symbolic link is refused; say so where the window shows it.
      if (isWaypointError(e) && e.code === 'unsafe_path') {
        if (m.kind !== 'waiting' || m.reason !== e.message) this.log.error(e.message);
        this.setMode({ kind: 'waiting', reason: e.message });
        return;
      }
      throw e;
    }
    if (s.kind === 'own') return this.takeOver();
    if (s.kind === 'wait') {
      this.setMode({ kind: 'waiting', reason: s.reason });
      return;
    }
    if (this.opts.takeFromBackground && isBackgroundOwner(s.owner) && (await this.askForStore(s.discovery))) return;
    if (m.kind === 'relay' && m.discovery.token === s.discovery.token && m.owner.ownerId === s.owner.ownerId) return this.pull(m);
    // A new owner (or our first): follow it from its current event count.
    const endpoint = { url: s.discovery.url, token: s.discovery.token };
    const headers = s.headers;
    const api = remoteApi(endpoint, { headers });
    const poll = remoteApi(endpoint, { timeoutMs: this.pollTimeoutMs, headers });
    let seq: number;
    try {
      seq = (await poll.info()).events;
    } catch (e) {
      this.log.warn(`the owner at ${s.discovery.url} did not answer yet: ${errorMessage(e)}`);
      return;
    }
    if (this.modeNow.kind === 'closed') return;
    this.lastSeq = seq;
    this.log.info(`relaying to ${describeOwner(s.owner)} at ${s.discovery.url}`);
    this.setMode({ kind: 'relay', owner: s.owner, discovery: s.discovery, api, poll });
    this.emitChange(undefined);
  }

  /**
   * Asks the background owner to give the store up. It finishes the calls in flight,
   * closes the store and releases the lock; this link waits meanwhile (its calls wait in
   * `ready`) and takes the store over as from any owner that left: by replaying the
   * journal, so nothing the background owner acknowledged is lost.
   */
  private async askForStore(d: Discovery): Promise<boolean> {
    const refused = await askBackgroundOwnerForStore(this.opts.storeDir, d);
    if (refused !== null) {
      this.log.debug(`the background owner at ${d.url} did not hand the store over: ${refused}`);
      return false;
    }
    const first = this.handoverUntil < Date.now();
    this.handoverUntil = Date.now() + 10_000;
    this.setMode({ kind: 'waiting', reason: 'a background owner is handing the store over to this window' });
    if (first) {
      this.log.info(`asked the background owner at ${d.url} for the store`);
      this.lookSoon();
    }
    return true;
  }

  private lookSoon(): void {
    if (Date.now() > this.handoverUntil) return;
    const t = setTimeout(() => {
      if (this.modeNow.kind === 'owner' || this.modeNow.kind === 'closed') return;
      void this.tick().then(() => this.lookSoon());
    }, 50);
    t.unref();
  }

  private async pull(m: Extract<LinkMode, { kind: 'relay' }>): Promise<void> {
    let seq: number;
    try {
      seq = (await m.poll.info()).events;
    } catch (e) {
      // The lock decides whether the owner is gone; an unanswered poll alone does not.
      this.log.debug(`the owner did not answer a poll: ${errorMessage(e)}`);
      return;
    }
    if (seq === this.lastSeq) return;
    if (seq < this.lastSeq) {
      // The owner's store was rebuilt or replaced: start over from its count.
      this.lastSeq = seq;
      this.emitChange(undefined);
      return;
    }
    const events = (await m.poll.events({ afterSeq: this.lastSeq, limit: EVENTS_PER_POLL })) as WaypointEvent[];
    if (this.modeNow !== m || events.length === 0) return;
    this.lastSeq = events[events.length - 1].seq;
    const taskIds = [...new Set(events.map((e) => e.taskId).filter((t): t is string => !!t))];
    this.emitChange({ events, taskIds });
  }

  private async takeOver(): Promise<void> {
    const was = this.modeNow;
    let engine: Engine;
    try {
      engine = await this.opts.openEngine();
    } catch (e) {
      if (isWaypointError(e) && e.code === 'locked') {
        this.log.debug(`another process took the store first: ${e.message}`);
      } else {
        this.log.error(`opening the store failed: ${errorMessage(e)}`);
        this.setMode({ kind: 'waiting', reason: `opening it failed: ${errorMessage(e)}` });
      }
      return;
    }
    if (this.modeNow.kind === 'closed') {
      await engine.close();
      return;
    }
    clearInterval(this.timer);
    this.timer = undefined;
    if (was.kind === 'relay') this.log.info(`the owner ${describeOwner(was.owner)} went away; this process owns the store now`);
    const changes = engine.onDidChange((e) => this.emitChange(e));
    const lost = engine.eventLog.onDidLoseOwnership((e) => void this.demote(engine, e.message));
    this.engineSub = { dispose: () => (changes.dispose(), lost.dispose()) };
    this.ownerApi = localApi(engine);
    this.setMode({ kind: 'owner', engine });
    this.emitChange(undefined);
  }

  /**
   * This process was stalled past its lease and another took the store over: its
   * engine refuses everything (lost_ownership). Drop it (no export: its view is
   * outdated) and look for the new owner, to relay to it like any other.
   */
  private async demote(engine: Engine, why: string): Promise<void> {
    if (this.modeNow.kind !== 'owner' || this.modeNow.engine !== engine) return;
    this.log.error(`${why} Switching to relay.`);
    this.engineSub?.dispose();
    this.engineSub = undefined;
    this.ownerApi = undefined;
    this.setMode({ kind: 'waiting', reason: 'this window lost the store to another process and is looking for it' });
    await engine.close().catch((e) => this.log.warn(`closing the replaced engine: ${errorMessage(e)}`));
    this.emitChange(undefined);
    this.start();
  }

  private setMode(next: LinkMode): void {
    const prev = this.modeNow;
    // A store that stays busy is looked at every poll; say so once, not every second.
    if (prev.kind === 'waiting' && next.kind === 'waiting' && prev.reason === next.reason) return;
    this.modeNow = next;
    for (const w of [...this.settledWaiters]) w();
    this.settledWaiters.clear();
    for (const l of [...this.modeListeners]) safely(() => l(next), this.log);
  }

  private emitChange(e: ChangeEvent | undefined): void {
    for (const l of [...this.changeListeners]) safely(() => l(e), this.log);
  }

  private routedApi(): EngineApi {
    const methods = new Set<string>(RPC_METHODS);
    const call = async (name: RpcMethod, arg: unknown): Promise<unknown> => {
      const m = await this.ready();
      const api = m.kind === 'owner' ? this.ownerApi! : m.api;
      return (api[name] as (a?: unknown) => Promise<unknown>)(arg);
    };
    // As in remoteApi: only real method names resolve, so `then` stays undefined.
    return new Proxy({} as EngineApi, {
      get: (_t, name) => (typeof name === 'string' && methods.has(name) ? (arg?: unknown) => call(name as RpcMethod, arg) : undefined),
    });
  }

  /** Stops watching; closes the engine if this process owns the store (exporting it and releasing the lock). */
  async close(): Promise<void> {
    const m = this.modeNow;
    clearInterval(this.timer);
    this.timer = undefined;
    this.setMode({ kind: 'closed' });
    await this.ticking;
    this.engineSub?.dispose();
    this.changeListeners.clear();
    this.modeListeners.clear();
    if (m.kind === 'owner') await m.engine.close();
  }
}

function safely(fn: () => void, log: Logger): void {
  try {
    fn();
  } catch (e) {
    log.error(`a store-change listener failed: ${errorMessage(e)}`);
  }
}
