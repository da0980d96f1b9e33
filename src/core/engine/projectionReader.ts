import type { Task, WaypointEvent } from '../model/schema';
import type { EventLog, ProjectionReader, TaskListFilter, TaskListing } from '../store/eventLog';
import type { Queries } from '../store/queries';

/**
 * The embedded store's asynchronous read side: answered from the owner's sql.js
 * projection (through `Queries`) and, for a task's events, from its log. An embedded
 * store holds one workspace, so `allWorkspaces` lists the same tasks as without it;
 * the shared PostgreSQL store answers it across workspaces.
 */
export class EmbeddedProjectionReader implements ProjectionReader {
  constructor(
    private readonly queries: Queries,
    private readonly log: EventLog,
  ) {}

  async listTasks(filter: TaskListFilter = {}): Promise<TaskListing[]> {
    return this.queries.tasks({ states: filter.states, limit: filter.limit }).map((t) => ({
      workspace: this.log.workspace,
      task: { id: t.id, title: t.title, goal: t.goal, agent: t.agent, state: t.state, attempt: t.attempt, createdAt: t.createdAt, updatedAt: t.updatedAt },
    }));
  }

  async getTask(taskId: string): Promise<Task | null> {
    return this.queries.findTask(taskId);
  }

  async taskEvents(taskId: string): Promise<WaypointEvent[]> {
    return this.log.read({ taskId });
  }
}
