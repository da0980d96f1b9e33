import * as fs from 'node:fs';
import * as path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { CLI, ROOT, serve } from '../support/mcp';
import { benchDir, fmtMs, median, printTable, type Row } from './util';

/**
 * What an agent waits for around each tool call: one `waypoint hook claude-code` process
 * relayed to a running owner (`waypoint serve`), against `node -e 0` — the floor of any
 * hook written for Node — measured alternately in this run. The hook calls are a real
 * session's: a prompt starts the task, then each edit is a PreToolUse (a step starts, the
 * workspace is checkpointed) and a PostToolUse after the file changed (the step ends,
 * checkpointed again). The full CLI's hook path (`dist/waypoint-cli.js`, what every hook
 * ran before the fast path) is measured the same way, for comparison.
 * Target (issue 17): the relayed hook costs ≤ 100 ms more than `node -e 0`, median of ≥ 15.
 */
const SESSION = '0b1e7c2a-5d4f-4e1a-9c3b-bench0000001';

function payload(ws: string, event: string, extra: Record<string, unknown>): string {
  return JSON.stringify({ session_id: SESSION, transcript_path: path.join(ws, '.bench-transcript.jsonl'), cwd: ws, permission_mode: 'default', hook_event_name: event, ...extra });
}

function timed(args: string[], input: string): number {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { input, stdio: ['pipe', 'ignore', 'pipe'] });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  if (String(r.stderr).includes('not recorded')) throw new Error(`the hook did not record: ${r.stderr}`);
  return ms;
}

export async function main(o: { quick?: boolean } = {}): Promise<void> {
  execFileSync(process.execPath, ['esbuild.js'], { cwd: ROOT, stdio: 'ignore' });
  const rounds = o.quick ? 4 : 15;
  const { dir: ws, cleanup } = benchDir('wp-bench-hooks-');
  const served = await serve(ws);
  try {
    // A small real project: ~300 source files.
    fs.cpSync(path.join(ROOT, 'src'), path.join(ws, 'src'), { recursive: true });
    execFileSync('git', ['init', '-q'], { cwd: ws });
    const fast = [CLI, 'hook', 'claude-code', '--workspace', ws];
    const full = [path.join(ROOT, 'dist', 'waypoint-cli.js'), 'hook', 'claude-code', '--workspace', ws];
    timed(fast, payload(ws, 'SessionStart', { source: 'startup' }));
    timed(fast, payload(ws, 'UserPromptSubmit', { prompt: 'Tidy the bench files' }));
    const hook: number[] = [];
    const floor: number[] = [];
    const before: number[] = [];
    const file = path.join(ws, 'src', 'bench-edit.ts');
    let n = 0;
    const edit = (args: string[], into: number[]) => {
      const id = `toolu_bench_${++n}`;
      const input = { file_path: file, old_string: '', new_string: `// ${n}` };
      into.push(timed(args, payload(ws, 'PreToolUse', { tool_name: 'Edit', tool_input: input, tool_use_id: id })));
      fs.writeFileSync(file, `export const edit = ${n};\n`);
      into.push(timed(args, payload(ws, 'PostToolUse', { tool_name: 'Edit', tool_input: input, tool_response: { filePath: file, success: true }, tool_use_id: id })));
    };
    // Warm the owner (JIT, stat cache) before anything is timed.
    edit(fast, []);
    for (let i = 0; i < rounds; i++) {
      floor.push(timed(['-e', '0'], ''));
      edit(fast, hook);
      floor.push(timed(['-e', '0'], ''));
      edit(full, before);
    }
    const mh = median(hook);
    const mf = median(floor);
    const mb = median(before);
    const rows: Row[] = [
      { measure: `relayed hook − node -e 0 (median of ${hook.length} / ${floor.length})`, waypoint: fmtMs(mh), baseline: fmtMs(mf), ratio: `+${fmtMs(mh - mf)}`, target: '≤ +100 ms', ok: mh - mf <= 100 },
      { measure: `full CLI hook path (before the fast path), median of ${before.length}`, waypoint: fmtMs(mb), baseline: fmtMs(mf), ratio: `+${fmtMs(mb - mf)}`, target: '(info)', ok: null },
    ];
    printTable('Agent hooks (`waypoint hook claude-code` relayed to `waypoint serve`)', rows);
  } finally {
    await served.stop();
    cleanup();
  }
}
