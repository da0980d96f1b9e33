import { diffLines } from 'diff';

/**
 * A file's change as independently decidable hunks. Each hunk is a maximal run of
 * removed and added lines between unchanged text; applying a decision per hunk
 * rebuilds the file from the unchanged runs plus, per hunk, either its new lines
 * (approved) or its old lines (rejected). So approving every hunk reproduces the
 * new content exactly and rejecting every hunk reproduces the old one — byte for
 * byte, including line endings and a missing final newline.
 */
export interface Hunk {
  index: number;
  /** 1-based first line in the old text (0 when it only adds at the very start). */
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  removed: string[];
  added: string[];
  /** Up to `context` unchanged lines before and after, for display only. */
  before: string[];
  after: string[];
}

interface Part {
  kind: 'same' | 'change';
  oldText: string;
  newText: string;
}

export interface FileChanges {
  parts: Part[];
  hunks: Hunk[];
}

function splitLines(text: string): string[] {
  if (!text) return [];
  const lines = text.split(/(?<=\n)/);
  return lines;
}

const strip = (l: string) => l.replace(/\r?\n$/, '');

export function computeHunks(oldText: string, newText: string, context = 3): FileChanges {
  const changes = diffLines(oldText, newText);
  const parts: Part[] = [];
  for (const c of changes) {
    if (!c.added && !c.removed) {
      parts.push({ kind: 'same', oldText: c.value, newText: c.value });
      continue;
    }
    const last = parts[parts.length - 1];
    const target = last && last.kind === 'change' ? last : (parts.push({ kind: 'change', oldText: '', newText: '' }), parts[parts.length - 1]);
    if (c.removed) target.oldText += c.value;
    else target.newText += c.value;
  }
  const hunks: Hunk[] = [];
  let oldLine = 1;
  let newLine = 1;
  parts.forEach((p, i) => {
    const oldLs = splitLines(p.oldText);
    const newLs = splitLines(p.newText);
    if (p.kind === 'change') {
      const prev = i > 0 ? splitLines(parts[i - 1].oldText) : [];
      const next = i + 1 < parts.length ? splitLines(parts[i + 1].oldText) : [];
      hunks.push({
        index: hunks.length,
        oldStart: oldLs.length ? oldLine : oldLine - 1,
        oldLines: oldLs.length,
        newStart: newLs.length ? newLine : newLine - 1,
        newLines: newLs.length,
        removed: oldLs.map(strip),
        added: newLs.map(strip),
        before: prev.slice(-context).map(strip),
        after: next.slice(0, context).map(strip),
      });
    }
    oldLine += oldLs.length;
    newLine += newLs.length;
  });
  return { parts, hunks };
}

/** The file content with each hunk approved (its new lines) or rejected (its old lines). */
export function applyDecisions(changes: FileChanges, approved: ReadonlySet<number>): string {
  let out = '';
  let h = 0;
  for (const p of changes.parts) {
    if (p.kind === 'same') out += p.oldText;
    else out += approved.has(h++) ? p.newText : p.oldText;
  }
  return out;
}

export function lineStats(changes: FileChanges): { added: number; removed: number } {
  return changes.hunks.reduce((a, h) => ({ added: a.added + h.newLines, removed: a.removed + h.oldLines }), { added: 0, removed: 0 });
}
