/**
 * A crash-test appender: opens workspace argv[3]'s log in the team store at argv[2]
 * and appends one event after another until killed, printing each key only once its
 * commit is durable (acknowledged). Started with a task of its own (argv[4]).
 */
import { PgEventLog } from '../../src/core/store/postgres';

async function run(): Promise<void> {
  const [url, workspaceId, task] = process.argv.slice(2);
  const log = await PgEventLog.open({ url, workspace: { id: workspaceId, machine: `m-${workspaceId.slice(0, 4)}`, path: `/crash/${workspaceId}` }, retryMs: 60_000, owner: `crash-${task}` });
  const start = await log.append([
    {
      type: 'task.started',
      taskId: task,
      corr: task,
      key: `${task}-start`,
      by: 'crash',
      op: 'task.start',
      result: { taskId: task },
      data: { goal: 'crash', title: task, agent: null, plan: [{ id: 'a', title: 'A' }], owner: { id: 'crash' }, leaseTtlMs: 60_000 },
    },
  ]);
  await start.durable;
  process.stdout.write(`${task}-start\n`);
  // Several appends in flight at once (as an engine serving several agents has): group commits.
  let i = 0;
  const lane = async (): Promise<void> => {
    for (;;) {
      const key = `${task}-${i++}`;
      const r = await log.append([{ type: 'lease.heartbeat', taskId: task, corr: task, key, by: 'crash', data: {} }]);
      await r.durable;
      process.stdout.write(`${key}\n`);
    }
  };
  await Promise.all([lane(), lane(), lane()]);
}

run().catch((e) => {
  process.stderr.write(`child failed: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(3);
});
