import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { COMMANDS, main } from '../../src/cli/main';
import { Engine } from '../../src/core/engine/engine';
import { assertReadable, fuzzParams, hostileString, listingOutside } from '../support/fuzz';
import { tmpDir } from '../support/tmp';

/**
 * Random argv arrays into the CLI's dispatcher (`main(argv, io)`, the function
 * dist/cli.js runs), in-process against a real store. Invariants: the exit code is
 * 0, 1 (refused) or 2 (usage); a failure says why on stderr, as `waypoint: …`
 * without a stack trace; with --json it is `{ error: { code, message } }` and the
 * code is never 'internal' (an unexpected exception is a bug); nothing is written
 * outside the workspace — HOME points into the sentinel directory too, so a write
 * to ~ would show; and the store still equals a rebuild of its events at the end.
 */
class Capture extends Writable {
  text = '';
  override _write(chunk: Buffer, _enc: string, cb: () => void): void {
    this.text += chunk.toString();
    cb();
  }
}

// Long-running servers and the stdin hook are not one-shot commands; their parsing is the same code.
const EXCLUDED = new Set(['serve', 'mcp', 'hook claude-code']);

describe('fuzz: CLI arguments (in-process dispatcher, real store)', function () {
  this.timeout(300_000);
  let sandbox: ReturnType<typeof tmpDir>;
  let ws: string;
  let home: string | undefined;
  const ids = { task: '', checkpoint: '' };

  before(async () => {
    sandbox = tmpDir('wp-fuzz-cli-');
    ws = path.join(sandbox.dir, 'ws');
    fs.mkdirSync(path.join(sandbox.dir, 'home'));
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'a.txt'), 'a\n');
    fs.writeFileSync(path.join(ws, 'plan.json'), JSON.stringify([{ id: 's1', title: 'S1' }]));
    home = process.env.HOME;
    process.env.HOME = path.join(sandbox.dir, 'home');
    const engine = await Engine.open({ workspace: ws, store: { lock: { waitMs: 200 } } });
    const t = await engine.startTask({ goal: 'cli fuzz target', plan: [{ id: 'a', title: 'A' }] });
    ids.task = t.taskId;
    ids.checkpoint = t.baseCheckpointId;
    await engine.close();
  });
  after(() => {
    if (home === undefined) delete process.env.HOME;
    else process.env.HOME = home;
    sandbox?.cleanup();
  });

  const names = Object.keys(COMMANDS).filter((n) => !EXCLUDED.has(n));
  const optionNames = [...new Set(Object.values(COMMANDS).flatMap((c) => Object.entries(c.options).flatMap(([n, o]) => [`--${n}`, ...(o.short ? [`-${o.short}`] : [])])))];
  const word = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...optionNames, '--json', '--help', '-h', '--lock-wait', '--owner', '--', '-', '--no-such-option', '-x') },
    { weight: 2, arbitrary: hostileString.filter((s) => s.length < 5000) },
    { weight: 1, arbitrary: fc.constantFrom(...names.flatMap((n) => n.split(' '))) },
  );
  const value = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(() => ids.task, () => ids.checkpoint, 'a', 's1', 'plan.json', '../plan.json', '/etc/passwd', '0', '-1', '99999999999999999999', '{"a":1}', '[]', 'yes').map((v) => (typeof v === 'function' ? v() : v)) },
    { weight: 2, arbitrary: hostileString.filter((s) => s.length < 5000) },
  );
  /** A command with options it knows, given plausible or hostile values, with stray words mixed in. */
  const wellFormed = fc.constantFrom(...names).chain((name) => {
    const opts = Object.entries(COMMANDS[name].options);
    const opt = opts.length
      ? fc.constantFrom(...opts).chain(([n, o]): fc.Arbitrary<string[]> => (o.type === 'boolean' ? fc.constant([`--${n}`]) : value.map((v) => [`--${n}`, v])))
      : fc.constant([] as string[]);
    return fc.tuple(fc.array(opt, { maxLength: 5 }), fc.option(word, { freq: 2 })).map(([os, stray]) => [...name.split(' '), ...os.flat(), ...(stray === null ? [] : [stray])]);
  });
  const anyWords: fc.Arbitrary<string[]> = fc.array(word, { maxLength: 8 });
  const argv: fc.Arbitrary<string[]> = fc.tuple(fc.oneof({ weight: 3, arbitrary: wellFormed }, { weight: 1, arbitrary: anyWords }), fc.boolean()).map(([words, json]) => [...words, ...(json ? ['--json'] : [])]);

  it('a command word naming an Object.prototype property is an unknown command, not a crash', async () => {
    // Found by the property below (seed -345784769): `waypoint __proto__` reached `cmd.run is not a function`.
    for (const w of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'task __proto__', '__proto__ start']) {
      const out = new Capture();
      const err = new Capture();
      const code = await main(['--workspace', ws, ...w.split(' '), '--json'], { stdout: out as never, stderr: err as never });
      assert.equal(code, 2, `${w}: ${err.text}`);
      assert.match(err.text, /^waypoint: Unknown command/, w);
      assert.equal((JSON.parse(out.text.trim()) as { error: { code: string } }).error.code, 'usage', w);
    }
  });

  it('every argv: a clear exit code and message, never a stack trace or an internal error, nothing written outside', async () => {
    const outsideBefore = listingOutside(sandbox.dir, ws);
    const codes = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(argv, async (args) => {
        // Global options first, so a fuzzed value cannot swallow --workspace.
        const full = ['--workspace', ws, '--lock-wait', '2', ...args];
        // The dispatcher resolves the command from the first words; global options may come before it.
        const out = new Capture();
        const err = new Capture();
        const code = await main(full, { stdout: out as never, stderr: err as never });
        codes.set(code, (codes.get(code) ?? 0) + 1);
        const context = JSON.stringify(args).slice(0, 300);
        assert.ok([0, 1, 2].includes(code), `exit ${code} for ${context}`);
        assertReadable(err.text || 'ok', `stderr for ${context}`);
        if (code !== 0) {
          assert.match(err.text, /^waypoint: \S/, `a failure says why on stderr for ${context}: ${err.text}`);
          if (args.includes('--json') && !args.includes('--help') && !args.includes('-h')) {
            const last = out.text.trim().split('\n').pop()!;
            const body = JSON.parse(last) as { error: { code: string; message: string } };
            assert.notEqual(body.error.code, 'internal', `internal error for ${context}: ${body.error.message}`);
          }
        }
        assert.doesNotMatch(err.text, /TypeError|ReferenceError|RangeError|Cannot read propert|is not a function|undefined is not/, `a JavaScript error leaked for ${context}: ${err.text}`);
        assert.deepEqual(listingOutside(sandbox.dir, ws), outsideBefore, `wrote outside the workspace for ${context}`);
      }),
      fuzzParams(200),
    );
    console.log(`      exit codes: ${JSON.stringify(Object.fromEntries(codes))}`);
    assert.ok((codes.get(2) ?? 0) > 10 && (codes.get(1) ?? 0) + (codes.get(0) ?? 0) > 10, `exit codes seen: ${JSON.stringify([...codes])}`);
    const engine = await Engine.open({ workspace: ws, store: { lock: { waitMs: 2000 } } });
    try {
      const v = await engine.verify();
      assert.ok(v.ok, JSON.stringify(v.differences));
    } finally {
      await engine.close();
    }
  });
});
