import fs from 'node:fs';
import path from 'node:path';
import * as vscode from 'vscode';
import { activated, eventually, report } from './extension';
import { embeddedStore } from '../../support/embedded';
import type { EventStore } from '../../../src/core/store/eventStore';

/**
 * Figures that must be measured inside the extension host, for `npm run bench`
 * (which runs only this file, with WAYPOINT_BENCH=1, and reads the BENCH lines).
 * Skipped in the ordinary test run: these are measurements, not assertions.
 */
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('bench (extension host)', function () {
  this.timeout(300_000);
  before(function () {
    if (process.env.WAYPOINT_BENCH !== '1') this.skip();
  });

  it('measures activation, the tree root with 1,000 tasks, and an auto checkpoint from the watcher', async () => {
    const api = await activated();
    report(`BENCH activation_ms ${api.activationMs.toFixed(2)}`);
    const engine = await api.engine();
    // 1,000 tasks as the store records them (one task.started event each).
    for (let i = 0; i < 1000; i += 100) {
      await Promise.all(
        Array.from({ length: 100 }, (_, k) =>
          embeddedStore(engine).commit([
            {
              type: 'task.started',
              taskId: `t_bench_${i + k}`,
              corr: `c_${i + k}`,
              key: `bench-task-${i + k}`,
              by: 'bench',
              data: { goal: `Benchmark task ${i + k}`, title: `Benchmark task ${i + k}`, agent: 'bench', plan: [{ id: 'a', title: 'A' }, { id: 'b', title: 'B', dependsOn: ['a'] }], owner: { id: 'bench' }, leaseTtlMs: 3_600_000 },
            },
          ]).durable,
        ),
      );
    }
    const times: number[] = [];
    for (let r = 0; r < 7; r++) {
      const t0 = performance.now();
      const rows = await api.treeRows();
      times.push(performance.now() - t0);
      if (rows.length < 1000) throw new Error(`only ${rows.length} rows`);
    }
    report(`BENCH tree_root_1000_ms ${median(times).toFixed(2)}`);

    // A 10-file burst checkpointed from the watcher's dirty set vs a full rescan.
    const root = vscode.workspace.workspaceFolders![0].uri.fsPath;
    fs.mkdirSync(path.join(root, 'bench'), { recursive: true });
    for (let i = 0; i < 300; i++) fs.writeFileSync(path.join(root, 'bench', `f${i}.ts`), `export const v${i} = 0;\n`.repeat(40));
    const { taskId } = await engine.startTask({ goal: 'bench burst', leaseTtlMs: 3_600_000 });
    const hint: number[] = [];
    const full: number[] = [];
    for (let r = 0; r < 5; r++) {
      const before = engine.queries.checkpoints(taskId).length;
      for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(root, 'bench', `f${r * 10 + i}.ts`), `export const v = ${r};\n`);
      await new Promise((res) => setTimeout(res, 1500)); // let the watcher deliver the burst
      const t0 = performance.now();
      await api.flushAutoCheckpoint();
      hint.push(performance.now() - t0);
      await eventually(() => engine.queries.checkpoints(taskId).length > before, 'the auto checkpoint');
      for (let i = 0; i < 10; i++) fs.writeFileSync(path.join(root, 'bench', `f${100 + r * 10 + i}.ts`), `export const w = ${r};\n`);
      const t1 = performance.now();
      await engine.checkpoint({ taskId, label: 'full rescan' });
      full.push(performance.now() - t1);
    }
    report(`BENCH auto_checkpoint_10_files_hint_ms ${median(hint).toFixed(2)}`);
    report(`BENCH checkpoint_10_files_full_rescan_ms ${median(full).toFixed(2)}`);
    await engine.abandonTask({ taskId });
  });

  it('measures the review panel on 1,000 changed files (50,000 changed lines): open to first content', async () => {
    const api = await activated();
    const engine = await api.engine();
    const root = vscode.workspace.workspaceFolders![0].uri.fsPath;
    const rev = await engine.startTask({ goal: 'bench review', leaseTtlMs: 3_600_000 });
    await engine.startStep({ taskId: rev.taskId, title: 'a big change' });
    fs.mkdirSync(path.join(root, 'review'), { recursive: true });
    for (let i = 0; i < 1000; i++) fs.writeFileSync(path.join(root, 'review', `m${i}.ts`), Array.from({ length: 50 }, (_, k) => `export const x${k} = ${i};`).join('\n') + '\n');
    await engine.completeStep({ taskId: rev.taskId, stepId: 's1' });
    await engine.requestReview({ taskId: rev.taskId });
    // Open → first content (the page reports it has drawn the goal and the file list),
    // then close, several times: the first open is cold (webview resources, scan), the
    // rest show the usual figure. Both are reported.
    const reviewTabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputWebview && t.input.viewType.includes('waypoint.review'));
    const opens: number[] = [];
    for (let r = 0; r < 5; r++) {
      // Wall clock on both sides: the page stamps the frame that drew the list.
      const t2 = Date.now();
      const shown = await api.openReview(rev.taskId);
      opens.push(shown.at - t2);
      if (shown.files < 1000) throw new Error(`the review listed ${shown.files} files`);
      await vscode.window.tabGroups.close(reviewTabs());
      await eventually(() => reviewTabs().length === 0, 'the review panel to close');
    }
    report(`BENCH review_open_1000_files_first_ms ${opens[0].toFixed(2)}`);
    report(`BENCH review_open_1000_files_ms ${median(opens).toFixed(2)}`);
  });

  it('measures the Task Timeline on a task of 5,000 events: open to first paint', async () => {
    const api = await activated();
    const engine = await api.engine();
    // 714 steps in layers of 20 (each after two of the layer before), each failed once
    // and then completed, with a checkpoint and a shell command: 1 + 714 × 7 = 4,999
    // events, written as the store records them (the engine's own calls would scan the
    // workspace at every step and take minutes).
    const STEPS = 714;
    const taskId = 't_bench_timeline';
    const corr = 'c_bench_timeline';
    const id = (i: number) => `s${i}`;
    const plan = Array.from({ length: STEPS }, (_, i) => ({ id: id(i), title: `Step ${i}: change module ${i % 37}`, ...(i >= 20 ? { dependsOn: [id(i - 20), id(i - 20 + ((i + 1) % 20))] } : {}) }));
    const ev = <T extends Parameters<EventStore['commit']>[0][number]>(e: Omit<T, 'taskId' | 'corr' | 'by'>) => ({ ...e, taskId, corr, by: 'bench-agent' }) as T;
    await embeddedStore(engine).commit([ev({ type: 'task.started', key: 'bench-tl-start', data: { goal: 'Timeline bench', title: 'Timeline bench: 5,000 events', agent: 'bench', plan, owner: { id: 'bench-agent' }, leaseTtlMs: 3_600_000 } })]).durable;
    let parent: string | null = null;
    for (let i = 0; i < STEPS; i += 50) {
      const batch = [];
      for (let k = i; k < Math.min(STEPS, i + 50); k++) {
        const stepId = id(k);
        const deps = plan[k].dependsOn ?? [];
        const cp = `cp_bench_tl_${k}`;
        batch.push(
          ev({ type: 'step.started', key: `b-${k}-s1`, data: { stepId, title: plan[k].title, attempt: 1, taskAttempt: 1, inputs: null, adhoc: false, dependsOn: deps } }),
          ev({ type: 'step.failed', key: `b-${k}-f1`, data: { stepId, error: `test ${k} failed`, recoverable: true, class: 'recoverable', attempt: 1, backoffMs: 1000 } }),
          ev({ type: 'step.started', key: `b-${k}-s2`, data: { stepId, title: plan[k].title, attempt: 2, taskAttempt: 1, inputs: null, adhoc: false, dependsOn: deps } }),
          ev({ type: 'side_effect.intent', key: `b-${k}-i`, data: { key: `sh-${k}`, stepId, kind: 'shell', description: `npm test -- module${k % 37}`, args: null, attempt: 1 } }),
          ev({ type: 'side_effect.done', key: `b-${k}-d`, data: { key: `sh-${k}`, result: null, by: 'agent' } }),
          ev({ type: 'step.completed', key: `b-${k}-c`, data: { stepId, outputs: null, summary: null } }),
          ev({ type: 'checkpoint.created', key: `b-${k}-cp`, data: { checkpointId: cp, kind: 'step_end', stepId, label: null, parentId: parent, manifestRef: null, files: 0, filesChanged: 0, bytes: 0 } }),
        );
        parent = cp;
      }
      await embeddedStore(engine).commit(batch).durable;
    }
    const events = (await engine.events({ taskId })).length;
    if (events < 4_999) throw new Error(`the task holds ${events} events`);
    const tabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) => t.input instanceof vscode.TabInputWebview && t.input.viewType.includes('waypoint.timeline'));
    const opens: number[] = [];
    const pages: number[] = [];
    for (let r = 0; r < 5; r++) {
      // Wall clock on both sides: the page stamps the frame that drew the timeline, and
      // says how long after its own navigation began (VS Code's webview set-up is the rest).
      const t0 = Date.now();
      const shown = await api.openTimeline(taskId);
      opens.push(shown.at - t0);
      pages.push(shown.pageMs);
      if (shown.steps < STEPS || shown.attempts < STEPS * 2) throw new Error(`the timeline drew ${shown.steps} steps and ${shown.attempts} attempts`);
      await vscode.window.tabGroups.close(tabs());
      await eventually(() => tabs().length === 0, 'the timeline to close');
    }
    report(`BENCH timeline_open_5000_events_first_ms ${opens[0].toFixed(2)}`);
    report(`BENCH timeline_open_5000_events_ms ${median(opens).toFixed(2)}`);
    report(`BENCH timeline_page_5000_events_first_ms ${pages[0].toFixed(2)}`);
    report(`BENCH timeline_page_5000_events_ms ${median(pages).toFixed(2)}`);
  });
});
