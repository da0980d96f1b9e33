import * as http from 'node:http';
import { WaypointError, errorMessage } from '../model/errors';

/**
 * One POST to a store owner's loopback endpoint, with no dependency on the engine: the
 * CLI's fast hook path loads this and nothing heavier, because agents run hooks
 * synchronously around every tool call.
 */
export const DEFAULT_RPC_TIMEOUT_MS = 120_000;
export const DEFAULT_RPC_CONNECT_TIMEOUT_MS = 5_000;

/**
 * Why a remote call failed. `delivered: false` means the request never reached the
 * owner (refused, or no connection in time), so nothing can have happened there and
 * the caller may look for the store's owner again and retry; otherwise the call's
 * fate is unknown and must not be repeated blindly.
 */
export class RpcTransportError extends WaypointError {
  constructor(
    message: string,
    readonly delivered: boolean,
  ) {
    super('io', message, { delivered });
  }
}

/**
 * One POST on node:http rather than fetch: undici's fetch never settles when the peer
 * drops the connection before answering (and its timers do not hold the event loop,
 * so a CLI would exit 0 with nothing done), and it has no connect timeout.
 */
export function postLoopback(url: URL, headers: Record<string, string>, body: string, o: { timeoutMs: number; connectTimeoutMs: number }): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    let connected = false;
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(connectTimer);
      clearTimeout(answerTimer);
      fn();
    };
    const fail = (why: string) => finish(() => {
      reject(new RpcTransportError(why, connected));
      req.destroy();
    });
    const req = http.request(url, { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => finish(() => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') })));
      res.on('error', (e) => fail(`the answer broke off (${errorMessage(e)})`));
      res.on('aborted', () => fail('the connection dropped in the middle of the answer'));
    });
    // Both timers are ref'd on purpose: while a call is pending, the process must not end.
    const connectTimer = setTimeout(() => fail(`no connection within ${o.connectTimeoutMs} ms`), o.connectTimeoutMs);
    const answerTimer = setTimeout(() => fail(`no answer within ${Math.round(o.timeoutMs / 1000)} s`), o.timeoutMs);
    req.on('socket', (s) => {
      const onConnect = () => {
        connected = true;
        clearTimeout(connectTimer);
      };
      if (!s.connecting) onConnect();
      else s.once('connect', onConnect);
    });
    req.on('error', (e) => {
      const code = (e as NodeJS.ErrnoException).code;
      fail(code === 'ECONNRESET' && connected ? 'it dropped the connection' : `${errorMessage(e)}${code && !errorMessage(e).includes(code) ? ` (${code})` : ''}`);
    });
    req.end(body);
  });
}

