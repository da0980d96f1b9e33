import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

/**
 * No ids where a person reads: a toast, a status bar message, or a quick pick's or
 * tree row's label, description, detail, title or placeholder never interpolates a
 * task, step, checkpoint, rollback or owner id. Ids stay in tooltips, Copy Id, the
 * events document and `--json`. Every template in src/extension and webview-ui is read
 * with the TypeScript parser, so a tooltip or a log line is not counted.
 */
const ROOT = path.resolve(__dirname, '..', '..');
const ID_EXPR = /(?:\.id|\btaskId|\bstepId|\bcheckpointId|\brollbackId|\bownerId|\bcorrelationId|\bpreRollbackCheckpointId)$/;
const SHOWN_CALLS = /^(?:show(?:Information|Warning|Error)Message|setStatusBarMessage|showInputBox)$/;
const SHOWN_PROPS = new Set(['label', 'description', 'detail', 'placeHolder', 'prompt', 'message']);
/** In VS Code a `title` is read (a quick pick's, an input box's); in a webview it is an element's tooltip. */
const SHOWN_PROPS_EDITOR = new Set([...SHOWN_PROPS, 'title']);

function sources(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((d) => {
    const rel = `${dir}/${d.name}`;
    if (d.isDirectory()) return sources(rel);
    return /\.ts$/.test(d.name) && !d.name.endsWith('.d.ts') ? [rel] : [];
  });
}

/** Templates shown to a person that interpolate an id, as `line: template`. */
export function idsShownIn(fileName: string, text: string, props = SHOWN_PROPS_EDITOR): string[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const hits: string[] = [];
  const shown = (n: ts.Node): boolean => {
    const p = n.parent;
    if (ts.isPropertyAssignment(p) && p.initializer === n && ts.isIdentifier(p.name) && props.has(p.name.text)) return true;
    if (ts.isCallExpression(p) && p.arguments[0] === n) {
      const callee = ts.isPropertyAccessExpression(p.expression) ? p.expression.name.text : ts.isIdentifier(p.expression) ? p.expression.text : '';
      return SHOWN_CALLS.test(callee);
    }
    return false;
  };
  const visit = (n: ts.Node) => {
    if (ts.isTemplateExpression(n) && shown(n) && n.templateSpans.some((s) => ID_EXPR.test(s.expression.getText(sf)))) {
      hits.push(`${sf.getLineAndCharacterOfPosition(n.getStart(sf)).line + 1}: ${n.getText(sf).slice(0, 140)}`);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return hits;
}

describe('lint: no ids in what a person reads', () => {
  it('finds an id in a toast, a label or a description, not in a tooltip or a log line', () => {
    const hits = idsShownIn('x.ts', [
      'vscode.window.showWarningMessage(`Task ${task.id} is done`);',
      'const item = { label: `${s.title}`, description: `${s.status} · ${s.id}` };',
      'const row = { tooltip: `Task id ${t.id}` };',
      'log.info(`[resume] ${ctx.task.id}`);',
      'vscode.window.showInformationMessage(`Started “${task.title}”`);',
      'const pick = { title: `Resume ${taskId}` };',
    ].join('\n'));
    assert.deepEqual(hits, ['1: `Task ${task.id} is done`', '2: `${s.status} · ${s.id}`', '6: `Resume ${taskId}`']);
  });

  it('none in src/extension or webview-ui', () => {
    const found: string[] = [];
    for (const dir of ['src/extension', 'webview-ui']) {
      for (const f of sources(dir)) {
        const props = dir === 'webview-ui' ? SHOWN_PROPS : SHOWN_PROPS_EDITOR;
        for (const h of idsShownIn(f, fs.readFileSync(path.join(ROOT, f), 'utf8'), props)) found.push(`${f}:${h}`);
      }
    }
    assert.deepEqual(found, []);
  });
});
