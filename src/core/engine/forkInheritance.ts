import type { CheckpointMeta, EventDataOf, PlanItem, StepStatus, WaypointEvent } from '../model/schema';

/**
 * What a fork inherits from its original: the original's goal, the steps it had
 * finished when the checkpoint was taken (with their outputs), and the steps it went
 * on to work on afterwards, which the fork leaves behind.
 *
 * Read from the original's events folded up to the checkpoint's own event, not from
 * the projection: the projection holds only the latest state, and a later rollback of
 * the original abandons steps that were complete at the checkpoint. The events also
 * outlive a deleted original, so a fork's resume context still says what it inherited.
 */
export interface InheritedStep {
  id: string;
  title: string;
  status: 'completed' | 'skipped';
  outputs: unknown;
  summary: string | null;
}

export interface LeftBehindStep {
  id: string;
  title: string;
  /** Its status when the checkpoint was taken (pending when the original planned it later). */
  statusAtCheckpoint: StepStatus;
  /** Its status in the original now. */
  statusNow: StepStatus;
}

export interface ForkInheritance {
  original: { taskId: string; goal: string; title: string };
  checkpoint: { id: string; kind: CheckpointMeta['kind']; label: string | null; stepId: string | null; createdAt: number };
  inherited: InheritedStep[];
  leftBehind: LeftBehindStep[];
  /** The original's steps the fork has still to do (everything not inherited), dependencies on inherited steps dropped as met. */
  remaining: PlanItem[];
}

interface FoldedStep {
  id: string;
  title: string;
  dependsOn: string[];
  status: StepStatus;
  outputs: unknown;
  summary: string | null;
}

/** The steps as the events up to `untilSeq` (inclusive) leave them, in plan order. */
function foldSteps(events: readonly WaypointEvent[], untilSeq: number): Map<string, FoldedStep> {
  const steps = new Map<string, FoldedStep>();
  const plan = (items: readonly PlanItem[]) => {
    for (const i of items) if (!steps.has(i.id)) steps.set(i.id, { id: i.id, title: i.title, dependsOn: [...(i.dependsOn ?? [])], status: 'pending', outputs: null, summary: null });
  };
  for (const e of events) {
    if (e.seq > untilSeq) break;
    const set = (id: string, patch: Partial<FoldedStep>) => {
      const s = steps.get(id);
      if (s) Object.assign(s, patch);
    };
    switch (e.type) {
      case 'task.started':
        plan((e.data as EventDataOf<'task.started'>).plan);
        break;
      case 'task.plan_updated':
        plan((e.data as EventDataOf<'task.plan_updated'>).added);
        break;
      case 'step.started': {
        const d = e.data as EventDataOf<'step.started'>;
        if (!steps.has(d.stepId)) steps.set(d.stepId, { id: d.stepId, title: d.title, dependsOn: [...d.dependsOn], status: 'pending', outputs: null, summary: null });
        set(d.stepId, { status: 'in_progress' });
        break;
      }
      case 'step.completed': {
        const d = e.data as EventDataOf<'step.completed'>;
        set(d.stepId, { status: 'completed', outputs: d.outputs ?? null, summary: d.summary });
        break;
      }
      case 'step.failed':
        set((e.data as EventDataOf<'step.failed'>).stepId, { status: 'failed' });
        break;
      case 'step.skipped': {
        const d = e.data as EventDataOf<'step.skipped'>;
        set(d.stepId, { status: 'skipped', summary: d.reason });
        break;
      }
      case 'step.abandoned':
        set((e.data as EventDataOf<'step.abandoned'>).stepId, { status: 'abandoned' });
        break;
      default:
        break;
    }
  }
  return steps;
}

/**
 * The inheritance of a fork from `checkpointId`, given the original task's events in
 * seq order. Null when the events hold no `checkpoint.created` for that checkpoint or
 * no `task.started` (a store whose history of that task is gone).
 */
export function forkInheritance(events: readonly WaypointEvent[], checkpointId: string): ForkInheritance | null {
  const started = events.find((e) => e.type === 'task.started');
  const cpEvent = events.find((e) => e.type === 'checkpoint.created' && (e.data as EventDataOf<'checkpoint.created'>).checkpointId === checkpointId);
  if (!started || !cpEvent || !started.taskId) return null;
  const cp = cpEvent.data as EventDataOf<'checkpoint.created'>;
  const atCheckpoint = foldSteps(events, cpEvent.seq);
  const now = foldSteps(events, Number.POSITIVE_INFINITY);
  const inherited: InheritedStep[] = [];
  const inheritedIds = new Set<string>();
  for (const s of atCheckpoint.values()) {
    if (s.status !== 'completed' && s.status !== 'skipped') continue;
    inherited.push({ id: s.id, title: s.title, status: s.status, outputs: s.outputs, summary: s.summary });
    inheritedIds.add(s.id);
  }
  const leftBehind: LeftBehindStep[] = [];
  const remaining: PlanItem[] = [];
  for (const s of now.values()) {
    if (inheritedIds.has(s.id)) continue;
    const before = atCheckpoint.get(s.id)?.status ?? 'pending';
    // Touched at all (before or after the checkpoint) without being finished by it: the fork does it again its own way.
    if (s.status !== 'pending' || before !== 'pending') leftBehind.push({ id: s.id, title: s.title, statusAtCheckpoint: before, statusNow: s.status });
    const deps = s.dependsOn.filter((d) => !inheritedIds.has(d));
    remaining.push({ id: s.id, title: s.title, ...(deps.length ? { dependsOn: deps } : {}) });
  }
  const sd = started.data as EventDataOf<'task.started'>;
  return {
    original: { taskId: started.taskId, goal: sd.goal, title: sd.title },
    checkpoint: { id: cp.checkpointId, kind: cp.kind, label: cp.label, stepId: cp.stepId, createdAt: cpEvent.ts },
    inherited,
    leftBehind,
    remaining,
  };
}
