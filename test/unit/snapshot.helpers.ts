/** Shared helpers for the snapshot tests: real temp directories, cleaned up after each test. */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { BlobStore } from '../../src/core/snapshot/index.js';

export class TempDirs {
  private readonly dirs: string[] = [];
  async make(prefix = 'wp-snap-'): Promise<string> {
    // realpath: os.tmpdir() may itself be a symlink (macOS), and resolveInside compares real paths.
    const d = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), prefix)));
    this.dirs.push(d);
    return d;
  }
  async cleanup(): Promise<void> {
    for (const d of this.dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
  }
}

export async function writeTree(root: string, files: Record<string, string | Buffer>): Promise<void> {
  for (const [rel, content] of Object.entries(files)) {
    const abs = path.join(root, rel);
    await fs.mkdir(path.dirname(abs), { recursive: true });
    await fs.writeFile(abs, content);
  }
}

/** Every file under `root` (excluding nothing) with its content, for byte-identical comparisons. */
export async function readTree(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  async function walk(dir: string, rel: string) {
    for (const d of await fs.readdir(dir, { withFileTypes: true })) {
      const r = rel ? `${rel}/${d.name}` : d.name;
      const abs = path.join(dir, d.name);
      if (d.isSymbolicLink()) out.set(r, `-> ${await fs.readlink(abs)}`);
      else if (d.isDirectory()) await walk(abs, r);
      else {
        const st = await fs.stat(abs);
        out.set(r, `${st.mode & 0o111 ? 'x' : '-'} ${(await fs.readFile(abs)).toString('base64')}`);
      }
    }
  }
  await walk(root, '');
  return out;
}

export async function newStore(tmp: TempDirs): Promise<BlobStore> {
  return new BlobStore(path.join(await tmp.make('wp-store-'), 'objects'), { durability: 'deferred' });
}

/** Makes an mtime old enough that the scanner trusts its stat cache (not "racily clean"). */
export async function ageTree(root: string): Promise<void> {
  const old = new Date(Date.now() - 60_000);
  async function walk(dir: string) {
    for (const d of await fs.readdir(dir, { withFileTypes: true })) {
      const abs = path.join(dir, d.name);
      if (d.name === '.git') continue;
      if (d.isDirectory()) await walk(abs);
      else if (d.isFile()) await fs.utimes(abs, old, old);
    }
  }
  await walk(root);
}
