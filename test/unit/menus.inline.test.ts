import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CheckpointKind, SideEffectStatus, StepStatus, TaskState } from '../../src/core/model/schema';

/**
 * A row of the Tasks view shows its inline actions as icons at its right edge, and
 * each icon takes width from the title: at the default sidebar width five of them
 * cut "Add a maxLength check" to "Add a maxLengt…". So every row, whatever its
 * context value, shows at most two; the rest are in its context menu.
 *
 * The context values are spelled as the tree spells them (tasksTreeNodes.ts,
 * captureNodes.ts): `task:<state>:<flags in order>`, `step:<status>[:exhausted][:open]`,
 * `checkpoint:<kind>[:restorable][:history]`, `effect:<status>`. Every state and every
 * combination of flags is tried, so a pair of flags that never meet today still
 * cannot add a third icon.
 */
const ROOT = path.resolve(__dirname, '..', '..');
const MAX_INLINE = 2;
const TASK_FLAGS = ['resumable', 'open', 'deletable', 'reviewable', 'undoable', 'forked', 'held-retries'];

interface MenuItem {
  command: string;
  when?: string;
  group?: string;
}

function subsets<T>(xs: readonly T[]): T[][] {
  return xs.reduce<T[][]>((acc, x) => acc.concat(acc.map((s) => [...s, x])), [[]]);
}

function contextValues(): string[] {
  const out: string[] = [];
  for (const state of TaskState.options) for (const flags of subsets(TASK_FLAGS)) out.push(`task:${state}:${flags.join(':')}`);
  for (const status of StepStatus.options) for (const ex of ['', ':exhausted']) for (const open of ['', ':open']) out.push(`step:${status}${ex}${open}`);
  for (const kind of CheckpointKind.options) for (const r of ['', ':restorable']) for (const hist of ['', ':history']) out.push(`checkpoint:${kind}${r}${hist}`);
  for (const status of SideEffectStatus.options) out.push(`effect:${status}`);
  return out;
}

/** Whether a menu item's `when` holds for a row of the Tasks view with this context value (the clauses package.json uses). */
function shows(when: string, contextValue: string): boolean {
  return when.split('&&').every((clause) => {
    const c = clause.trim();
    if (c === 'view == waypoint.tasks') return true;
    if (c.startsWith('view ==')) return false;
    const re = /^viewItem =~ \/(.*)\/([a-z]*)$/.exec(c);
    if (re) return new RegExp(re[1]!, re[2]).test(contextValue);
    const eq = /^viewItem == (\S+)$/.exec(c);
    if (eq) return eq[1] === contextValue;
    throw new Error(`a view/item/context clause this test cannot read: ${c}`);
  });
}

describe('Tasks view inline actions', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { contributes: { menus: Record<string, MenuItem[]> } };
  const items = pkg.contributes.menus['view/item/context']!;
  const inline = items.filter((i) => i.group?.startsWith('inline'));

  it(`shows at most ${MAX_INLINE} inline actions on any row`, () => {
    const crowded = contextValues()
      .map((cv) => ({ cv, commands: inline.filter((i) => shows(i.when ?? '', cv)).map((i) => i.command) }))
      .filter((r) => r.commands.length > MAX_INLINE);
    assert.deepEqual(crowded.slice(0, 5), [], `${crowded.length} context values show more than ${MAX_INLINE} inline actions`);
  });

  it('keeps every inline action in the context menu too', () => {
    for (const cv of contextValues()) {
      const inMenu = new Set(items.filter((i) => !i.group?.startsWith('inline') && shows(i.when ?? '', cv)).map((i) => i.command));
      for (const i of inline) if (shows(i.when ?? '', cv)) assert.ok(inMenu.has(i.command), `${i.command} is inline on ${cv} but not in its context menu`);
    }
  });

  it('reads the real rows: a running task, a failed step, a restorable checkpoint each get an action', () => {
    const count = (cv: string) => inline.filter((i) => shows(i.when ?? '', cv)).length;
    assert.ok(count('task:running:open:reviewable') >= 1);
    assert.ok(count('step:failed:open') >= 1);
    assert.ok(count('checkpoint:step_end:restorable') >= 1);
  });
});
