/**
 * Strings PostgreSQL cannot hold, held anyway.
 *
 * A `text` value cannot contain NUL (U+0000), and a JavaScript string may hold lone
 * surrogates that have no UTF-8 form at all (Node's encoder would silently turn them
 * into U+FFFD on the wire). The embedded store keeps both exactly, so the team store
 * must too: an event whose goal, title, key or step output holds one round-trips.
 *
 * JSON columns (`data`, `result`) need nothing: JSON.stringify writes NUL and lone
 * surrogates as `\u0000` / `\ud800` escapes, which the `json` type stores as written
 * and JSON.parse reads back exactly (the commit passes them as `json[]`, never through
 * a function that would unescape them). Text columns get this reversible encoding:
 *
 *   U+0010 (DLE, "data link escape") followed by the code unit as 4 lowercase hex
 *   digits stands for that code unit. NUL, every lone surrogate and DLE itself are
 *   written so; every other string is stored verbatim.
 *
 * So an ordinary string (no NUL, no DLE, no lone surrogate: all real text) is stored
 * byte for byte as given and stays readable and indexable in SQL; the encoding is
 * injective (DLE is always escaped), so unique keys stay unique.
 */

const ESC = '\u0010';

/** NUL, DLE, a high surrogate not followed by a low one, a low surrogate not preceded by a high one. */
const NEEDS = /[\u0000\u0010]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const NEEDS_ALL = new RegExp(NEEDS.source, 'g');
const ESCAPED = /\u0010([0-9a-f]{4})/g;

/** A string as a PostgreSQL `text` value can hold it (verbatim unless it must not be). */
export function toPgText(s: string): string;
export function toPgText(s: string | null | undefined): string | null;
export function toPgText(s: string | null | undefined): string | null {
  if (s == null) return null;
  return NEEDS.test(s) ? s.replace(NEEDS_ALL, (c) => ESC + c.charCodeAt(0).toString(16).padStart(4, '0')) : s;
}

/** The string `toPgText` was given. A DLE not followed by 4 hex digits (someone else's row) is left as it is. */
export function fromPgText(s: string): string;
export function fromPgText(s: string | null | undefined): string | null;
export function fromPgText(s: string | null | undefined): string | null {
  if (s == null) return null;
  return s.includes(ESC) ? s.replace(ESCAPED, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))) : s;
}
