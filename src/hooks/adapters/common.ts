import { z } from 'zod';
import type { TodoItem, TodoStatus, ToolKind } from '../events';

/** Shared pieces of the adapters: bounded strings, tool kinds by name, todo lists. */
export const Id = z.string().min(1, 'must not be empty').max(200);
export const PathText = z.string().max(4096);
export const Args = z.record(z.string(), z.unknown());

export function kindOf(name: string, table: { edit: readonly string[]; shell: readonly string[]; todo: readonly string[] }): ToolKind {
  if (table.edit.includes(name)) return 'edit';
  if (table.shell.includes(name)) return 'shell';
  if (table.todo.includes(name)) return 'todo';
  return 'other';
}

export const str = (v: unknown): string | undefined => (typeof v === 'string' && v ? v : undefined);
export const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** Paths an edit tool names, from whichever of the usual argument names the agent uses. */
export function filesIn(args: Record<string, unknown> | undefined, keys: readonly string[] = ['file_path', 'filePath', 'path', 'notebook_path', 'absolute_path', 'target_file']): string[] {
  if (!args) return [];
  const out: string[] = [];
  for (const k of keys) {
    const v = args[k];
    if (typeof v === 'string' && v) out.push(v);
  }
  for (const k of ['files', 'filePaths', 'paths']) {
    const v = args[k];
    if (Array.isArray(v)) for (const f of v) if (typeof f === 'string' && f) out.push(f);
  }
  return [...new Set(out)].slice(0, 1000);
}

/** A todo item as any of the agents writes one: content/text/title/step, status in its own words. */
const TodoEntry = z.looseObject({
  content: z.string().max(2000).optional(),
  text: z.string().max(2000).optional(),
  title: z.string().max(2000).optional(),
  step: z.string().max(2000).optional(),
  description: z.string().max(2000).optional(),
  status: z.string().max(40).optional(),
});
export const TodoList = z.array(TodoEntry).max(500);

export function todosFrom(list: z.infer<typeof TodoList>): TodoItem[] {
  return list
    .map((t) => ({ content: (t.content ?? t.text ?? t.title ?? t.step ?? t.description ?? '').trim(), status: todoStatus(t.status) }))
    .filter((t) => t.content.length > 0);
}

function todoStatus(s: string | undefined): TodoStatus {
  switch ((s ?? '').toLowerCase().replace(/[\s-]/g, '_')) {
    case 'in_progress':
    case 'inprogress':
    case 'active':
      return 'in_progress';
    case 'completed':
    case 'complete':
    case 'done':
      return 'completed';
    case 'cancelled':
    case 'canceled':
      return 'cancelled';
    default:
      return 'pending';
  }
}

/** Files a patch names (`*** Update File: x`, as Codex's apply_patch and VS Code's apply_patch write them). */
export function filesInPatch(patch: string | undefined): string[] {
  if (!patch) return [];
  const out: string[] = [];
  for (const m of patch.matchAll(/^\*\*\* (?:Update|Add|Delete) File: (.+)$/gm)) out.push(m[1].trim());
  for (const m of patch.matchAll(/^\*\*\* Move to: (.+)$/gm)) out.push(m[1].trim());
  return [...new Set(out)].slice(0, 1000);
}

/** Tool arguments some agents pass as a JSON string. */
export function argsOf(v: unknown): Record<string, unknown> | undefined {
  if (typeof v === 'string') {
    try {
      const parsed: unknown = JSON.parse(v);
      return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}
