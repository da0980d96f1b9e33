import * as vscode from 'vscode';
import { z } from 'zod';
import { WaypointError } from '../core/model/errors';
import type { Step, StepStatus, Task } from '../core/model/schema';
import { isOpen } from '../core/model/taskStates';
import { STATE_LABEL } from './presentation';
import type { EngineHost } from './engineHost';
import { listTasks, taskDetail } from './storeReads';
import { StepNode } from './tasksTreeNodes';

/**
 * What a person does to a step by hand, from the Tasks view, the timeline, the review
 * page or the palette: complete it, skip it, fail it (each recorded as the person's
 * answer, in any state but a final one, without becoming the task's driver), or retry
 * it (start it again, which needs the task to be driven: a resumed one).
 */
export type StepAction = 'complete' | 'skip' | 'fail' | 'retry';

/** The step statuses each action applies to (the step state machine's moves). */
export const STEP_ACTION_FROM: Readonly<Record<StepAction, readonly StepStatus[]>> = {
  complete: ['in_progress'],
  fail: ['in_progress'],
  skip: ['pending', 'failed'],
  retry: ['failed', 'skipped', 'abandoned'],
};

const VERB: Record<StepAction, { title: string; done: string; pick: string }> = {
  complete: { title: 'Complete Step', done: 'completed', pick: 'Complete which step? (those in progress)' },
  skip: { title: 'Skip Step', done: 'skipped', pick: 'Skip which step? (those not begun, or failed)' },
  fail: { title: 'Fail Step', done: 'marked failed', pick: 'Fail which step? (those in progress)' },
  retry: { title: 'Retry Step', done: 'started again', pick: 'Retry which step? (those failed, skipped or abandoned)' },
};

/** A step named by a webview's message or a notification's button (parsed, never cast). */
export const StepRef = z.strictObject({ taskId: z.string().min(1).max(64), stepId: z.string().min(1).max(128) });

export interface StepActionsDeps {
  host: EngineHost;
  /** The window's lease owner: a retried step is started by this window. */
  owner: () => { id: string; pid: number };
}

export class StepActions {
  constructor(private readonly deps: StepActionsDeps) {}

  /** Runs `action` on the step `arg` names, or on one the person picks; what the step became, or undefined when nothing was done. */
  async run(action: StepAction, arg: unknown): Promise<StepStatus | undefined> {
    const target = await this.resolve(action, arg);
    if (!target) return undefined;
    const { task, step } = target;
    if (!STEP_ACTION_FROM[action].includes(step.status)) {
      throw new WaypointError('illegal_transition', `Step “${step.title}” is ${step.status.replace('_', ' ')}; ${VERB[action].title.toLowerCase()} applies to a step that is ${STEP_ACTION_FROM[action].map((s) => s.replace('_', ' ')).join(' or ')}.`);
    }
    const api = await this.deps.host.api();
    const ref = { taskId: task.id, stepId: step.id };
    switch (action) {
      case 'complete':
        await api.completeStep({ ...ref, by: 'person' });
        break;
      case 'skip':
        await api.skipStep({ ...ref, by: 'person', reason: 'skipped by hand in VS Code' });
        break;
      case 'fail': {
        const error = await vscode.window.showInputBox({
          title: `Waypoint: Fail Step — ${step.title}`,
          prompt: 'Why did it fail? The step stays retryable; the agent sees this on resume.',
          value: 'failed (marked by hand)',
          validateInput: (v) => (v.trim() ? undefined : 'Say why, in a few words.'),
          ignoreFocusOut: true,
        });
        if (error === undefined) return undefined;
        await api.failStep({ ...ref, by: 'person', error: error.trim(), recoverable: true });
        break;
      }
      case 'retry':
        if (task.state === 'interrupted' || task.state === 'suspended') {
          const resume = 'Resume Task';
          const a = await vscode.window.showWarningMessage(`Waypoint: “${task.title}” is ${STATE_LABEL[task.state]}; resume it to retry “${step.title}” (the agent starts the step again).`, resume);
          if (a === resume) await vscode.commands.executeCommand('waypoint.resumeTask', task.id);
          return undefined;
        }
        await api.startStep({ ...ref, owner: this.deps.owner() });
        break;
    }
    const now = (await taskDetail(this.deps.host, task.id)).steps.find((s) => s.id === step.id)?.status;
    void vscode.window.setStatusBarMessage(`$(check) Waypoint: step “${step.title}” ${VERB[action].done}`, 5_000);
    return now;
  }

  /** The step a tree row, a `{taskId, stepId}` or a quick pick names; one candidate is taken without asking. */
  private async resolve(action: StepAction, arg: unknown): Promise<{ task: Task; step: Step } | undefined> {
    if (arg instanceof StepNode) arg = { taskId: arg.step.taskId, stepId: arg.step.id };
    if (arg !== undefined && arg !== null) {
      const ref = StepRef.safeParse(arg);
      if (!ref.success) throw new Error('Choose a step in the Waypoint view.');
      const d = await taskDetail(this.deps.host, ref.data.taskId);
      const step = d.steps.find((s) => s.id === ref.data.stepId);
      if (!step) throw new WaypointError('not_found', `Task “${d.task.title}” has no step '${ref.data.stepId}'.`);
      return { task: d.task, step };
    }
    const { tasks, stepsByTask } = await listTasks(this.deps.host);
    const candidates = tasks
      .filter(isOpen)
      .flatMap((task) => (stepsByTask.get(task.id) ?? []).filter((s) => STEP_ACTION_FROM[action].includes(s.status)).map((step) => ({ task, step })));
    if (candidates.length === 0) {
      void vscode.window.showInformationMessage(`Waypoint: no step to ${action} (${VERB[action].pick.replace(/^.*\((.*)\)$/, '$1')} of an open task).`);
      return undefined;
    }
    if (candidates.length === 1) return candidates[0];
    const pick = await vscode.window.showQuickPick(
      candidates.map((c) => ({ label: c.step.title, description: c.step.status.replace('_', ' '), detail: `${c.task.title} — ${STATE_LABEL[c.task.state]}`, c })),
      { placeHolder: VERB[action].pick, matchOnDescription: true, matchOnDetail: true },
    );
    return pick?.c;
  }
}
