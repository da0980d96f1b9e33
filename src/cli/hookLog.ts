import * as fs from 'node:fs';
import * as path from 'node:path';
import { APPEND_NOFOLLOW, STORE_FILE_MODE, ensurePrivateStoreDir } from '../core/store/storeDir';
import { storeDirOf } from '../ownership/storeDirOf';

/**
 * What a hook could not record, on stderr and in `.waypoint/hooks.log`. A hook always
 * exits 0 (a failing hook would block or confuse the agent), so this log is where a
 * person finds out.
 */
export function hookLog(workspace: string, line: string): void {
  process.stderr.write(`waypoint hook: ${line}\n`);
  try {
    const dir = storeDirOf(workspace);
    ensurePrivateStoreDir(dir);
    const fd = fs.openSync(path.join(dir, 'hooks.log'), APPEND_NOFOLLOW, STORE_FILE_MODE);
    try {
      fs.writeSync(fd, `${new Date().toISOString()} ${line}\n`);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // logging must not fail the hook either
  }
}

/** Reads one hook event from stdin: bounded in size and time, because a hook must never hang the agent. */
export async function readHookInput(maxBytes = 1024 * 1024, timeoutMs = 5000): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no hook input on stdin within ${timeoutMs} ms`)), timeoutMs);
    process.stdin.on('data', (d: Buffer) => {
      size += d.length;
      if (size > maxBytes) {
        clearTimeout(timer);
        reject(new Error(`hook input exceeds ${maxBytes} bytes`));
        process.stdin.destroy();
      } else chunks.push(d);
    });
    process.stdin.once('end', () => {
      clearTimeout(timer);
      resolve();
    });
    process.stdin.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
  return Buffer.concat(chunks).toString('utf8');
}
