import * as assert from 'node:assert/strict';
import Module from 'node:module';
import fc from 'fast-check';
import { parseInbound } from '../../src/extension/webview/parseInbound';
import { TimelineHostMessage, TimelineModel, TimelinePageMessage, TimelinePageState } from '../../src/extension/timeline/protocol';
import { assertNoPollution, assertReadable, fuzzParams, hostileJson, hostileString, nested, protoObject } from '../support/fuzz';

/**
 * The timeline's message protocol: what each side accepts from the other. Malformed
 * messages are refused with one bounded log line and never throw; what is accepted
 * is schema-shaped. The page shell is checked for the same strict CSP as the review's.
 */
const model = (): Record<string, unknown> => ({
  task: { id: 't_1', title: 'T', state: 'running', agent: null, correlationId: 'c_1', createdAt: 1, updatedAt: 2, attempt: 1, interruption: null },
  events: 3,
  lastSeq: 3,
  range: { start: 1, end: 2 },
  steps: [{ id: 'a', title: 'A', status: 'pending', dependsOn: [], layer: 0, row: 0, adhoc: false, error: null }],
  attempts: [{ id: 'a#1', stepId: 'a', n: 1, taskAttempt: 1, start: 1, end: null, outcome: 'running', by: 'me', error: null, failureClass: null }],
  checkpoints: [{ id: 'cp_1', kind: 'task_base', label: null, title: 'Start of task', stepId: null, at: 1, filesChanged: 0, changes: '3 files', restorable: true }],
  effects: [{ key: 'k', kind: 'shell', description: 'ls', status: 'in_doubt', stepId: null, at: 1, endedAt: null, attempts: 1, error: null, resolvedBy: null, shell: true }],
  marks: [{ id: '1', at: 1, type: 'task.started', text: 'Started' }],
  omitted: { steps: 0, attempts: 0, checkpoints: 0, effects: 0, marks: 0 },
});

const validPage = (): Record<string, unknown>[] => [
  { type: 'ready' },
  { type: 'refresh' },
  { type: 'showEvents' },
  { type: 'shown', steps: 1, attempts: 1, at: 5, pageMs: 120.5, whole: true },
  { type: 'checkpoint', action: 'compare', checkpointId: 'cp_1' },
  { type: 'checkpoint', action: 'fork', checkpointId: 'cp_1' },
];
const validHost = (): Record<string, unknown>[] => [{ type: 'init', model: model() }, { type: 'error', text: 'e' }];

function inbound(valid: () => Record<string, unknown>[]): fc.Arbitrary<unknown> {
  const mutated = fc
    .tuple(fc.nat(), fc.array(fc.tuple(fc.constantFrom('type', 'action', 'checkpointId', 'model', 'steps', 'at', '__proto__', 'constructor', 'extra'), hostileJson), { maxLength: 3 }))
    .map(([i, sets]) => {
      const base = valid()[i % valid().length];
      const parts = Object.entries(base).filter(([k]) => !sets.some(([s]) => s === k)).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
      for (const [k, v] of sets) parts.push(`${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`);
      return JSON.parse(`{${parts.join(',')}}`) as unknown;
    });
  const cyclic = fc.constant(null).map(() => {
    const o: Record<string, unknown> = { type: 'init', model: null };
    o.model = o;
    return o;
  });
  const wide = fc.constant(null).map(() => ({ type: 'init', model: { ...model(), attempts: Array.from({ length: 20_001 }, (_, i) => ({ ...(model().attempts as object[])[0], id: `a#${i}` })) } }));
  return fc.oneof(
    { weight: 25, arbitrary: mutated },
    { weight: 10, arbitrary: fc.anything({ withNullPrototype: true, withObjectString: true, maxDepth: 3 }) },
    { weight: 5, arbitrary: hostileString },
    { weight: 5, arbitrary: fc.constantFrom(protoObject(), nested(5_000, 'object'), { type: { toString: null } }, { type: 'checkpoint', action: 'delete', checkpointId: 'cp_1' }, { type: 'checkpoint', action: 'rollback', checkpointId: 'x'.repeat(5_000) }) },
    { weight: 5, arbitrary: cyclic },
    { weight: 1, arbitrary: wide },
  );
}

describe('timeline protocol', function () {
  this.timeout(120_000);

  for (const [name, schema, from, valid] of [
    ['page → host', TimelinePageMessage, 'page', validPage],
    ['host → page', TimelineHostMessage, 'host', validHost],
    ['restored page state', TimelinePageState, 'page', () => [{ taskId: 't_1', focus: 'step:a' }]],
  ] as const) {
    it(`${name}: malformed messages are refused with one log line, never thrown; accepted ones are well-formed`, () => {
      let refused = 0;
      fc.assert(
        fc.property(inbound(valid as () => Record<string, unknown>[]), (raw) => {
          const lines: string[] = [];
          const msg = parseInbound(schema as never, raw, from, (l) => lines.push(l), 'timeline');
          assertNoPollution(name);
          if (msg === undefined) {
            refused++;
            assert.equal(lines.length, 1);
            assert.match(lines[0], new RegExp(`^\\[timeline\\] ignored a malformed message from the ${from}: \\S`));
            assert.ok(lines[0].length <= 400);
            assertReadable(lines[0], name);
          } else {
            assert.deepEqual(lines, []);
            assert.deepEqual((schema as typeof TimelinePageMessage).parse(msg), msg);
          }
        }),
        fuzzParams(300),
      );
      assert.ok(refused > 100, `${refused} refusals`);
    });
  }

  it('accepts each valid message, and refuses specific bad ones', () => {
    for (const m of [...validPage()]) assert.ok(TimelinePageMessage.safeParse(m).success, JSON.stringify(m));
    for (const m of validHost()) assert.ok(TimelineHostMessage.safeParse(m).success, JSON.stringify(m));
    const bad: unknown[] = [
      { type: 'checkpoint', action: 'delete', checkpointId: 'cp_1' }, // no such action
      { type: 'checkpoint', action: 'rollback' }, // no checkpoint
      { type: 'checkpoint', action: 'rollback', checkpointId: '' },
      { type: 'shown', steps: -1, attempts: 0, at: 0, pageMs: 1, whole: true },
      { type: 'shown', steps: 1, attempts: 0, at: 0, whole: true }, // no page time
      { type: 'ready', extra: 1 }, // strict: unknown keys refused
      { type: 'openFile', path: '/etc/passwd' },
    ];
    for (const m of bad) assert.equal(TimelinePageMessage.safeParse(m).success, false, JSON.stringify(m));
    const wrongOutcome = model();
    (wrongOutcome.attempts as Record<string, unknown>[])[0].outcome = 'exploded';
    assert.equal(TimelineModel.safeParse(wrongOutcome).success, false);
    const wrongEffect = model();
    (wrongEffect.effects as Record<string, unknown>[])[0].status = 'maybe';
    assert.equal(TimelineModel.safeParse(wrongEffect).success, false);
  });
});

describe('timeline webview: the page shell', () => {
  class Uri {
    constructor(readonly scheme: string, readonly authority: string, readonly path: string) {}
    static file(p: string): Uri {
      return new Uri('file', '', p);
    }
    static joinPath(base: Uri, ...parts: string[]): Uri {
      return new Uri(base.scheme, base.authority, [base.path.replace(/\/$/, ''), ...parts].join('/'));
    }
    toString(): string {
      return `${this.scheme}://${this.authority}${this.path}`;
    }
  }
  const webview = { cspSource: "'self' https://*.vscode-cdn.net", asWebviewUri: (u: Uri) => new Uri('https', 'file+.vscode-resource.vscode-cdn.net', u.path) };
  type Loader = (request: string, parent: unknown, isMain: boolean) => unknown;
  const M = Module as unknown as { _load: Loader };
  const original = M._load;
  M._load = (request, parent, isMain) => (request === 'vscode' ? { Uri } : original(request, parent, isMain));
  const { timelineHtml } = require('../../src/extension/timeline/html') as typeof import('../../src/extension/timeline/html');
  M._load = original;
  const ext = Uri.file('/ext');

  it("has a strict CSP (default-src 'none', one nonce'd script, no unsafe-*) and loads only the timeline bundle", () => {
    const html = timelineHtml(webview as never, ext as never, 'Timeline');
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]*)"/.exec(html)![1];
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'nonce-[A-Za-z0-9+/=]{20,}'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-|\*(?!\.vscode-cdn\.net)/);
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)];
    assert.equal(scripts.length, 1);
    assert.match(scripts[0][1], /src="[^"]*\/dist\/webview\/timeline\.js"/);
    assert.equal(scripts[0][2].trim(), '');
  });

  it('carries the first model inert: hostile titles cannot close the data block', () => {
    const m = model();
    (m.task as Record<string, unknown>).title = '</script><script>alert(1)</script><!--';
    const html = timelineHtml(webview as never, ext as never, 'Timeline', TimelineModel.parse(m));
    assert.equal([...html.matchAll(/<script\b/gi)].length, 2, 'the data block and our script, nothing injected');
    const block = /<script type="application\/json" id="waypoint-timeline-data">([\s\S]*?)<\/script>/.exec(html)![1];
    assert.doesNotMatch(block, /</);
    assert.equal((JSON.parse(block) as { task: { title: string } }).task.title, '</script><script>alert(1)</script><!--');
  });
});
