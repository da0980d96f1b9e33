/**
 * The one check every Waypoint webview message passes, on either side. In its own
 * module (no schemas of its own) so a page bundles only the protocol it speaks: the
 * timeline page no longer builds the review panel's schemas before it can draw.
 * No `vscode` import: pages bundle it.
 */
import type { $ZodType, output } from 'zod/v4/core';
import { safeParse } from 'zod/mini';

/**
 * Parses one message received from the other side (of the review panel, or of
 * another webview that names its `area` for the log line). A malformed one is refused
 * with one bounded log line naming its first problem, and never throws: the
 * other side may be broken or hostile, and a throw in a message handler would
 * only be swallowed without a trace.
 */
export function parseInbound<S extends $ZodType>(schema: S, raw: unknown, from: 'page' | 'host', warn: (line: string) => void, area = 'review'): output<S> | undefined {
  let problem: string;
  try {
    const r = safeParse(schema, raw);
    if (r.success) return r.data;
    const first = r.error.issues[0];
    problem = first ? `${first.path.map(String).join('.') || 'message'}: ${first.message}` : 'invalid';
  } catch (e) {
    problem = `unreadable (${e instanceof Error ? e.message : String(e)})`;
  }
  warn(`[${area}] ignored a malformed message from the ${from}: ${problem.length > 300 ? `${problem.slice(0, 299)}…` : problem}`);
  return undefined;
}
