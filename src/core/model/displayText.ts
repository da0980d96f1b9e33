/**
 * Recorded text (goals, titles, step errors, side-effect descriptions, file names) is
 * written by agents and by whatever an agent read, so it is data: shown to a person or
 * handed to an agent it must not act. A raw ESC starts terminal sequences (`ESC]52;c;…`
 * writes the clipboard, `ESC[2J` clears the screen), `\r` overwrites what a line said,
 * and a bidi override (U+202E) makes `invoice\u202etxt.exe` read as `invoiceexe.txt`.
 *
 * This is the one place such text is made safe to show: every C0 control (but `\n` and
 * `\t` where the output may hold several lines), DEL, every C1 control, the bidi
 * embeddings, overrides, isolates and marks, and the line/paragraph separators become a
 * visible escape (`\x1b`, `\u202e`). Stored text and `--json` output stay exact (JSON
 * escapes controls itself, and a bidi mark in a JSON string acts on no terminal).
 */

/** Controls, DEL, C1, bidi controls (U+061C, U+200E/F, U+202A–E, U+2066–9) and U+2028/9. */
const UNSAFE_ONE_LINE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, but a newline and a tab are kept (the output is read as lines). */
const UNSAFE_MULTI_LINE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

function escapeChar(c: string): string {
  const named = NAMED[c];
  if (named) return named;
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * `s` with every character that could act on a terminal, a Markdown reader or the
 * direction of the text around it replaced by a visible escape. `multiline` keeps `\n`
 * and `\t` (CLI text output, Markdown documents, tooltips); without it the text is one
 * line (tree labels, table cells, notifications).
 */
export function displayText(s: string, opts: { multiline?: boolean } = {}): string {
  const re = opts.multiline ? UNSAFE_MULTI_LINE : UNSAFE_ONE_LINE;
  re.lastIndex = 0;
  return re.test(s) ? s.replace(re, escapeChar) : s;
}

/** Whether `s` holds anything displayText would escape on one line. */
export function hasUnsafeDisplayChars(s: string): boolean {
  UNSAFE_ONE_LINE.lastIndex = 0;
  return UNSAFE_ONE_LINE.test(s);
}
