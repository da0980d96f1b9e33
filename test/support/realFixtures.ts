import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The hook payloads a real agent sent in the agent suite (test/fixtures/hooks-real/<agent>/
 * session.jsonl, written by `WAYPOINT_RECORD_FIXTURES=1 npm run test:agents`), one per line,
 * with the machine paths the recording replaced by `${VARS}` put back from `vars`.
 */
export function realPayloads(agent: string, vars: Record<string, string>, file = 'session.jsonl'): Record<string, any>[] {
  let text = fs.readFileSync(path.join(__dirname, '..', 'fixtures', 'hooks-real', agent, file), 'utf8');
  for (const [k, v] of Object.entries(vars)) text = text.replaceAll(`\${${k}}`, v);
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);
}
