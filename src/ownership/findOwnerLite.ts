import * as fs from 'node:fs';
import { readLockFile } from '../core/store/lockFile';
import { assertStoreNotLinked } from '../core/store/storeDir';
import { ownerStatusOf, type OwnerStatusOf } from './ownerStatus';
import { storeClaimOf, type ServedStore } from '../core/store/folderIdentity';

/**
 * `findOwner` for the fast hook path, without zod (loading it costs a hook ~35 ms of CPU,
 * on every tool call of every agent). The hand checks here are stricter than the zod
 * schemas in ownerLock.ts and discovery.ts: whatever they accept, the schemas accept with
 * the same values (a property test holds them to that), and whatever they doubt is left to
 * the full CLI, which validates with the schemas. So the fast path can only ever decline.
 */
export interface LiteLock {
  ownerId: string;
  pid: number;
  host: string;
  startedAt: number;
  leaseExpiresAt: number;
  leaseMs?: number;
  epoch: number;
  endpoint?: { url: string; discoveryFile?: string } | null;
}
export interface LiteDiscovery {
  url: string;
  token: string;
  pid: number;
  startedAt: number;
  epoch?: number;
  store?: ServedStore;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNum = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isInt = (v: unknown): v is number => Number.isSafeInteger(v);
const isStr = (v: unknown): v is string => typeof v === 'string';

export function liteLock(v: unknown): LiteLock | null {
  if (!isObj(v)) return null;
  const { ownerId, pid, host, startedAt, leaseExpiresAt, leaseMs, epoch, endpoint } = v;
  if (!isStr(ownerId) || !isInt(pid) || !isStr(host) || !isNum(startedAt) || !isNum(leaseExpiresAt)) return null;
  if (leaseMs !== undefined && !(isNum(leaseMs) && leaseMs > 0)) return null;
  if (epoch !== undefined && !(isInt(epoch) && epoch >= 0)) return null;
  let ep: LiteLock['endpoint'];
  if (endpoint === null) ep = null;
  else if (endpoint !== undefined) {
    // Older locks only; anything unusual is the full path's to judge.
    if (!isObj(endpoint) || Object.keys(endpoint).some((k) => k !== 'url' && k !== 'discoveryFile')) return null;
    if (!isStr(endpoint.url) || (endpoint.discoveryFile !== undefined && !isStr(endpoint.discoveryFile))) return null;
    ep = endpoint.discoveryFile === undefined ? { url: endpoint.url } : { url: endpoint.url, discoveryFile: endpoint.discoveryFile };
  }
  const out: LiteLock = { ownerId, pid, host, startedAt, leaseExpiresAt, epoch: epoch ?? 0 };
  if (leaseMs !== undefined) out.leaseMs = leaseMs;
  if (ep !== undefined) out.endpoint = ep;
  return out;
}

/** Only what an owner writes: a loopback URL, and nothing but the known keys. */
const LOOPBACK_URL = /^http:\/\/127\.0\.0\.1:([1-9]\d{0,4})\/mcp$/;
const DISCOVERY_KEYS = new Set(['url', 'token', 'pid', 'startedAt', 'epoch', 'store']);
const STORE_KEYS = new Set(['id', 'dir', 'dev', 'ino']);

function liteStore(v: unknown): ServedStore | null {
  if (!isObj(v) || Object.keys(v).some((k) => !STORE_KEYS.has(k))) return null;
  const { id, dir, dev, ino } = v;
  if (!isStr(id) || !/^[A-Za-z0-9_-]{8,64}$/.test(id) || !isStr(dir) || dir.length < 1 || dir.length > 4096) return null;
  if (!isStr(dev) || !/^\d{1,24}$/.test(dev) || !isStr(ino) || !/^\d{1,24}$/.test(ino)) return null;
  return { id, dir, dev, ino };
}

export function liteDiscovery(v: unknown): LiteDiscovery | null {
  if (!isObj(v) || Object.keys(v).some((k) => !DISCOVERY_KEYS.has(k))) return null;
  const { url, token, pid, startedAt, epoch, store } = v;
  if (!isStr(url)) return null;
  const port = LOOPBACK_URL.exec(url)?.[1];
  // A port past 65535 is no URL at all (zod's url() refuses it): never laxer than the schema.
  if (port === undefined || Number(port) > 65_535) return null;
  if (!isStr(token) || token.length < 32 || token.length > 256) return null;
  if (!isInt(pid) || pid <= 0 || !isNum(startedAt)) return null;
  if (epoch !== undefined && !(isInt(epoch) && epoch >= 0)) return null;
  const out: LiteDiscovery = epoch === undefined ? { url, token, pid, startedAt } : { url, token, pid, startedAt, epoch };
  if (store !== undefined) {
    const st = liteStore(store);
    if (!st) return null;
    out.store = st;
  }
  return out;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** The store's owner as the fast path sees it; `null` when it cannot tell (the full CLI decides then). */
export function findOwnerLite(storeDir: string, discoveryFile: string): OwnerStatusOf<LiteLock, LiteDiscovery> | null {
  assertStoreNotLinked(storeDir);
  const raw = readLockFile(storeDir);
  if (!raw) return { kind: 'none' };
  const info = liteLock(parseJson(raw.text));
  if (!info) return null;
  let d: LiteDiscovery | null = null;
  try {
    d = liteDiscovery(parseJson(fs.readFileSync(discoveryFile, 'utf8')));
  } catch {
    d = null;
  }
  return ownerStatusOf({ text: raw.text, info, mtimeMs: raw.mtimeMs }, d, storeClaimOf(storeDir));
}
