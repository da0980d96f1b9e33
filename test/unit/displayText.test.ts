import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { displayText } from '../../src/core/model/displayText';
import { buildCli, cli } from '../support/mcp';
import { tmpDir } from '../support/tmp';

/**
 * Recorded text is data (invariant 11): a goal or a step title holding terminal
 * sequences (`ESC]52;c;…` writes the clipboard, `ESC[2J` clears the screen), a carriage
 * return, or a bidi override is shown escaped by every text output, and kept exact in
 * the store and in --json.
 */
const ESC = '\u001b';
const HOSTILE = `fix ${ESC}]52;c;cm0gLXJmIH4=\u0007 now${ESC}[2J\rinvoice\u202etxt.exe\u2066x\u2069\u200f\u061c\u0085\u009b\u007f`;
/** What no human-facing output may hold raw: C0 but newline and tab, DEL, C1, bidi controls, line/paragraph separators. */
const RAW = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('displayText: recorded text shown escaped', () => {
  it('escapes controls, C1, DEL and bidi controls, keeps everything else exact', () => {
    const shown = displayText(HOSTILE);
    assert.doesNotMatch(shown, RAW);
    assert.ok(!shown.includes('\n'));
    assert.equal(displayText('a\u202eb\u001bc\rd\te\nf'), 'a\\u202eb\\x1bc\\rd\\te\\nf');
    assert.equal(displayText('tab\there\nnext\r', { multiline: true }), 'tab\there\nnext\\r');
    const plain = 'naïve 名前 😀 — “quoted” \\x1b (already text)';
    assert.equal(displayText(plain), plain);
    assert.equal(displayText(plain, { multiline: true }), plain);
  });
});

describe('CLI: no raw control character in text output (built dist/cli.js)', function () {
  this.timeout(120_000);
  before(() => buildCli());

  it('tasks, show, resume-context and steps print a hostile goal, title and step escaped; --json keeps it exact', () => {
    const t = tmpDir('wp-display-');
    try {
      fs.writeFileSync(path.join(t.dir, 'a.txt'), 'a\n');
      const plan = path.join(t.dir, 'plan.json');
      fs.writeFileSync(plan, JSON.stringify([{ id: 's1', title: `step ${HOSTILE}` }]));
      const started = cli(['task', 'start', '--goal', HOSTILE, '--plan', plan, '--workspace', t.dir, '--json']);
      assert.equal(started.status, 0, started.stderr);
      const taskId = (JSON.parse(started.stdout) as { taskId: string }).taskId;
      for (const args of [['tasks'], ['show', '--task', taskId], ['resume-context', '--task', taskId], ['events', '--task', taskId], ['show', '--task', HOSTILE]]) {
        const r = cli([...args, '--workspace', t.dir]);
        assert.doesNotMatch(r.stdout, RAW, `${args[0]} stdout: ${JSON.stringify(r.stdout)}`);
        assert.doesNotMatch(r.stderr, RAW, `${args[0]} stderr: ${JSON.stringify(r.stderr)}`);
      }
      const shown = cli(['show', '--task', taskId, '--workspace', t.dir]).stdout;
      assert.ok(shown.includes('invoice\\u202etxt.exe'), shown);
      const json = JSON.parse(cli(['show', '--task', taskId, '--workspace', t.dir, '--json']).stdout) as { task: { goal: string }; steps: { title: string }[] };
      assert.equal(json.task.goal, HOSTILE);
      assert.equal(json.steps[0]!.title, `step ${HOSTILE}`);
      const ctx = JSON.parse(cli(['resume-context', '--task', taskId, '--workspace', t.dir, '--json']).stdout) as { task: { goal: string }; markdown: string };
      assert.equal(ctx.task.goal, HOSTILE);
      // The Markdown is handed to agents as it is, so it is escaped inside the JSON too.
      assert.doesNotMatch(ctx.markdown, RAW);
    } finally {
      t.cleanup();
    }
  });
});
