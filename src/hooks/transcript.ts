import * as fs from 'node:fs';

/**
 * The agent's last message, from the tail of its transcript (JSON lines, as Claude
 * Code, Gemini CLI and VS Code write them): read bounded — at most the last 256 KiB,
 * never following a path that is not a regular file — and only for text. A transcript
 * that is missing, unreadable or in another shape yields nothing, never an error:
 * the digest is a courtesy, the hook must not fail for it.
 */
export const TRANSCRIPT_TAIL_BYTES = 256 * 1024;
export const DIGEST_TEXT_MAX = 2000;

export function lastAssistantMessage(transcriptPath: string | undefined, maxBytes = TRANSCRIPT_TAIL_BYTES): string | undefined {
  if (!transcriptPath) return undefined;
  let fd: number | undefined;
  try {
    const st = fs.lstatSync(transcriptPath);
    if (!st.isFile()) return undefined;
    // O_NONBLOCK: a transcript swapped for a FIFO since its lstat must not hang the hook (the fstat then refuses it).
    fd = fs.openSync(transcriptPath, fs.constants.O_RDONLY | (fs.constants.O_NOFOLLOW ?? 0) | (fs.constants.O_NONBLOCK ?? 0));
    if (!fs.fstatSync(fd).isFile()) return undefined;
    const len = Math.min(st.size, maxBytes);
    const buf = Buffer.alloc(len);
    fs.readSync(fd, buf, 0, len, st.size - len);
    const lines = buf.toString('utf8').split('\n');
    if (st.size > len) lines.shift(); // the first line is cut
    for (let i = lines.length - 1; i >= 0; i--) {
      const text = assistantText(lines[i]);
      if (text) return bound(text);
    }
    return undefined;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

export function bound(text: string, max = DIGEST_TEXT_MAX): string {
  const t = text.trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

function assistantText(line: string): string | undefined {
  if (!line.trim()) return undefined;
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (!entry || typeof entry !== 'object') return undefined;
  const e = entry as Record<string, unknown>;
  const msg = (e.message && typeof e.message === 'object' ? e.message : e) as Record<string, unknown>;
  const role = msg.role ?? e.type;
  if (role !== 'assistant' && role !== 'model') return undefined;
  return textOf(msg.content ?? msg.parts ?? msg.text);
}

function textOf(content: unknown): string | undefined {
  if (typeof content === 'string') return content || undefined;
  if (!Array.isArray(content)) return undefined;
  const parts = content.map((p) => (typeof p === 'string' ? p : p && typeof p === 'object' && typeof (p as { text?: unknown }).text === 'string' ? (p as { text: string }).text : '')).filter(Boolean);
  return parts.length ? parts.join('\n') : undefined;
}
