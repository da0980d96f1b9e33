import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import type { Engine } from '../../src/core/engine/engine';
import { isWaypointError } from '../../src/core/model/errors';
import { applyReview } from '../../src/core/review/applyReview';
import { GitCliCommitter } from '../../src/core/review/gitCli';
import { pathKeyProblem } from '../../src/core/snapshot/paths';
import { HostMessage, PageMessage, PageState, parseInbound } from '../../src/extension/review/protocol';
import { assertNoPollution, assertReadable, fuzzParams, hostileJson, hostileString, listingOf, listingOutside, nested, protoObject } from '../support/fuzz';
import { openEngine, tmpDir } from '../support/tmp';

/**
 * The review panel's inbound messages. The host-side panel (panel.ts) needs the
 * vscode module, so its two halves are fuzzed separately: `parseInbound`, the one
 * function both the host and the page call on every message they receive, and the
 * operation an `apply` message dispatches to, `applyReview`, on a real engine in a
 * real git repository.
 */
const FINGERPRINT = 'a'.repeat(32);

/** A valid page message of each type, the base a mutation starts from. */
const validPage = (): Record<string, unknown>[] => [
  { type: 'ready' },
  { type: 'refresh' },
  { type: 'requestHunks', path: 'src/a.ts' },
  { type: 'openDiff', path: 'src/a.ts' },
  { type: 'apply', message: 'Subject', decisions: [{ path: 'a', action: 'approve' }, { path: 'b', action: 'hunks', approved: [0], hunkCount: 2, fingerprint: FINGERPRINT }], finish: true },
  { type: 'apply', message: 'Subject', decisions: [{ path: 'a', action: 'leave' }, { path: 'b', action: 'hunks', approved: [0], left: [1], hunkCount: 3, fingerprint: FINGERPRINT }], finish: false },
  { type: 'undoCommit' },
  { type: 'rollback' },
  { type: 'resume' },
];

/** Messages a broken or hostile peer may post: mutated valid ones, random values, prototype keys, cycles, deep and wide. */
function inbound(valid: () => Record<string, unknown>[]): fc.Arbitrary<unknown> {
  const mutated = fc
    .tuple(fc.nat(), fc.array(fc.tuple(fc.constantFrom('type', 'path', 'message', 'decisions', 'action', 'approved', 'left', 'finish', '__proto__', 'constructor', 'extra'), hostileJson), { maxLength: 3 }))
    .map(([i, sets]) => {
      const base = valid()[i % valid().length];
      const parts = Object.entries(base).filter(([k]) => !sets.some(([s]) => s === k)).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
      for (const [k, v] of sets) parts.push(`${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`);
      return JSON.parse(`{${parts.join(',')}}`) as unknown;
    });
  const cyclic = fc.constantFrom('decisions', 'path', 'type').map((k) => {
    const o: Record<string, unknown> = { type: 'apply', message: 'm', decisions: [], finish: true };
    o[k] = o;
    return o;
  });
  // One oversized message is enough to exercise the bound; many would only cost time.
  const wide = fc.constant(null).map(() => ({ type: 'apply', message: 'm', decisions: Array.from({ length: 20_001 }, (_, i) => ({ path: `f${i}`, action: 'approve' })), finish: true }));
  return fc.oneof(
    { weight: 25, arbitrary: mutated },
    { weight: 10, arbitrary: fc.anything({ withNullPrototype: true, withObjectString: true, maxDepth: 3 }) },
    { weight: 5, arbitrary: hostileString },
    { weight: 5, arbitrary: fc.constantFrom(protoObject(), protoObject('constructor', { prototype: { polluted: 1 } }), nested(5_000, 'object'), { type: { toString: null } }, { taskId: 't_1', decisions: { ['k'.repeat(5_000)]: { whole: 'x' } } }) },
    { weight: 5, arbitrary: cyclic },
    { weight: 1, arbitrary: wide },
  );
}

describe('fuzz: webview messages (review protocol)', function () {
  this.timeout(300_000);

  for (const [name, schema, from, valid] of [
    ['page → host', PageMessage, 'page', validPage],
    ['host → page', HostMessage, 'host', () => [{ type: 'busy', busy: true, label: 'x' }, { type: 'error', text: 'e' }, { type: 'applied', ok: true, text: 't', commit: null }, { type: 'committed', committed: { sha: 'a'.repeat(40), subject: 's', reason: null, committed: ['a'], discarded: ['b'], left: ['c'], finished: false, canUndo: true } }]],
    ['restored page state', PageState, 'page', () => [{ taskId: 't_1', message: 'm', expanded: ['a'], decisions: { a: { whole: 'a', hunks: null, included: true, fingerprint: null }, b: { whole: 'm', hunks: ['a', 'l', 'r'], included: true, fingerprint: null } } }]],
  ] as const) {
    it(`${name}: malformed messages are refused with one log line, never thrown; accepted ones are well-formed`, () => {
      let refused = 0;
      fc.assert(
        fc.property(inbound(valid as () => Record<string, unknown>[]), (raw) => {
          const lines: string[] = [];
          const msg = parseInbound(schema as never, raw, from, (l) => lines.push(l));
          assertNoPollution(name);
          if (msg === undefined) {
            refused++;
            assert.equal(lines.length, 1, 'exactly one log line per refusal');
            assert.match(lines[0], new RegExp(`^\\[review\\] ignored a malformed message from the ${from}: \\S`));
            assert.ok(lines[0].length <= 400, `log line bounded: ${lines[0].length} chars`);
            assertReadable(lines[0], name);
          } else {
            assert.deepEqual(lines, []);
            // What was accepted parses again to itself: the handler sees only schema-shaped data.
            assert.deepEqual((schema as typeof PageMessage).parse(msg), msg);
          }
        }),
        fuzzParams(400),
      );
      assert.ok(refused > 100, `${refused} refusals`);
    });
  }

  describe('apply → applyReview on a real engine and git repository', () => {
    let sandbox: ReturnType<typeof tmpDir>;
    let ws: string;
    let engine: Engine;
    // Names git would read as pathspec magic or globs if they reached it unquoted.
    const NAMES = ['x.txt', '*.txt', '[x].txt', '?.txt', ':(glob)x.txt', '-rf', 'dir/y.txt', 'dir/*'];
    const git = (...args: string[]) => execFileSync('git', args, { cwd: ws, encoding: 'utf8' });
    const read = (n: string) => (fs.existsSync(path.join(ws, n)) ? fs.readFileSync(path.join(ws, n), 'utf8') : null);
    const write = (n: string, text: string | null) => {
      const abs = path.join(ws, n);
      if (text === null) fs.rmSync(abs, { force: true });
      else {
        fs.mkdirSync(path.dirname(abs), { recursive: true });
        fs.writeFileSync(abs, text);
      }
    };

    before(async () => {
      sandbox = tmpDir('wp-fuzz-webview-');
      ws = path.join(sandbox.dir, 'ws');
      fs.mkdirSync(ws);
      git('init', '-q', '-b', 'main');
      git('config', 'user.email', 'fuzz@example.com');
      git('config', 'user.name', 'Fuzz');
      write('.gitignore', '.waypoint/\n');
      for (const n of NAMES) write(n, `${n} v0\n`);
      git('add', '-A');
      git('commit', '-q', '-m', 'init');
      engine = await openEngine(ws);
    });
    after(async () => {
      await engine?.close();
      sandbox?.cleanup();
    });

    const edit = fc.constantFrom('modify', 'delete', 'keep');
    const decide = fc.constantFrom('approve', 'reject', 'none');
    const hostileDecision = fc.option(
      fc.oneof(fc.constantFrom('../outside.txt', '/etc/passwd', '.git/config', '.waypoint/waypoint.db', 'x.txt/../../y', 'a\\b', 'cafe\u0301', 'dir/../x.txt'), hostileString).map((p) => ({ path: p, action: 'approve' as const })),
      { freq: 2 },
    );

    it('decisions from the page: exactly the approved files are committed, rejected ones revert, hostile paths change nothing', async () => {
      const outsideBefore = listingOutside(sandbox.dir, ws);
      let run = 0;
      const seen = { applied: 0, refused: 0 };
      await fc.assert(
        fc.asyncProperty(fc.array(fc.tuple(edit, decide), { minLength: NAMES.length, maxLength: NAMES.length }), hostileDecision, async (plan, hostile) => {
          run++;
          const before = new Map(NAMES.map((n) => [n, read(n)]));
          const { taskId } = await engine.startTask({ goal: `review fuzz ${run}`, plan: [{ id: 's', title: 'Edit' }] });
          await engine.startStep({ taskId, stepId: 's' });
          NAMES.forEach((n, i) => {
            if (plan[i][0] === 'modify') write(n, `${n} v${run}\n`);
            else if (plan[i][0] === 'delete') write(n, null);
          });
          await engine.completeStep({ taskId, stepId: 's' });
          const changed = NAMES.filter((n) => read(n) !== before.get(n));
          const decisions: { path: string; action: 'approve' | 'reject' }[] = changed.flatMap((n) => {
            const d = plan[NAMES.indexOf(n)][1];
            return d === 'none' ? [] : [{ path: n, action: d }];
          });
          if (hostile && !decisions.some((d) => d.path === hostile.path)) decisions.push(hostile);
          const seqBefore = engine.eventLog.lastSeq;
          const filesBefore = listingOf(ws).filter((l) => !l.startsWith('.waypoint') && !l.startsWith('.git'));
          const headBefore = git('rev-parse', 'HEAD').trim();
          const outcome = await applyReview(engine, { taskId, message: `review ${run}\n\nWaypoint-Task: ${taskId}`, decisions }, new GitCliCommitter(ws)).then(
            (r) => ({ r }),
            (e: Error) => ({ e }),
          );
          if ('r' in outcome) {
            seen.applied++;
            // Approving a path that did not change is a no-op; every approved change, and nothing else, is committed.
            const approved = decisions.filter((d) => d.action === 'approve' && changed.includes(d.path)).map((d) => d.path);
            const sha = outcome.r.commit.sha;
            const committed = sha ? git('show', '--name-only', '--format=', sha).split('\n').filter(Boolean).map((l) => (l.startsWith('"') ? (JSON.parse(l) as string) : l)) : [];
            assert.deepEqual([...committed].sort(), [...approved].sort(), `commit holds exactly the approved changes (decisions ${JSON.stringify(decisions)})`);
            for (const d of decisions.filter((x) => x.action === 'reject')) assert.equal(read(d.path), before.get(d.path), `${d.path} reverted to the base`);
          } else {
            const e = outcome.e;
            seen.refused++;
            assert.ok(isWaypointError(e), `apply failed with a non-Waypoint error: ${e.stack}`);
            assertReadable(e.message, 'apply refusal');
            assert.ok(hostile && pathKeyProblem(hostile.path) !== null, `refused without a hostile path: ${e.message}`);
            assert.equal(engine.eventLog.lastSeq, seqBefore, 'a refused apply recorded nothing');
            assert.deepEqual(listingOf(ws).filter((l) => !l.startsWith('.waypoint') && !l.startsWith('.git')), filesBefore, 'a refused apply wrote nothing');
            assert.equal(git('rev-parse', 'HEAD').trim(), headBefore, 'a refused apply committed nothing');
            await engine.abandonTask({ taskId });
          }
          assert.deepEqual(listingOutside(sandbox.dir, ws), outsideBefore, 'nothing written outside the workspace');
          // Start the next run from a clean tree: commit whatever the person left uncommitted.
          git('add', '-A');
          if (git('status', '--porcelain').trim()) git('commit', '-q', '-m', `reset ${run}`);
        }),
        fuzzParams(8),
      );
      assert.ok(seen.applied > 1, JSON.stringify(seen));
    });
  });
});
