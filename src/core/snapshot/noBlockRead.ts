/**
 * Reading a file someone else controls without ever blocking the thread that reads
 * it: a path swapped for a FIFO blocks a plain open until a writer appears (an owner
 * whose main thread waits there stops serving), and a device can be read forever.
 * Such files are opened O_NONBLOCK (no effect on a regular file's reads), their
 * descriptor's fstat decides whether they are read at all, and a regular file is read
 * up to the size that fstat gave, never "to the end".
 */
import fss, { type Stats } from 'node:fs';

const fsc = fss.constants;
/** Read-only; an open of a FIFO returns at once (its fstat then refuses it). */
export const O_READ_NOBLOCK = fsc.O_RDONLY | (fsc.O_NONBLOCK ?? 0);
/** The same, and a symlink at the last component is not followed (ELOOP). */
export const O_READ_NOFOLLOW_NOBLOCK = O_READ_NOBLOCK | (fsc.O_NOFOLLOW ?? 0);

/** Open failures that mean "not a regular file here": a link not followed, a socket (ENXIO). */
const NOT_A_FILE = new Set(['ELOOP', 'ENXIO', 'EMLINK']);

/**
 * The content of the regular file at `p` (with its fstat), or null when what is there
 * is not one now: a FIFO, a socket, a device, a directory, or (with `follow: false`)
 * a symlink. Missing files and other errors throw, as fs.readFileSync would.
 */
export function readRegularSync(p: string, opts: { follow?: boolean } = {}): { bytes: Buffer; st: Stats } | null {
  let fd: number;
  try {
    fd = fss.openSync(p, opts.follow === false ? O_READ_NOFOLLOW_NOBLOCK : O_READ_NOBLOCK);
  } catch (err) {
    if (NOT_A_FILE.has((err as NodeJS.ErrnoException).code ?? '')) return null;
    throw err;
  }
  try {
    const st = fss.fstatSync(fd);
    if (!st.isFile()) return null;
    const bytes = Buffer.allocUnsafe(st.size);
    let got = 0;
    while (got < st.size) {
      const n = fss.readSync(fd, bytes, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    return { bytes: got === st.size ? bytes : bytes.subarray(0, got), st };
  } finally {
    fss.closeSync(fd);
  }
}
