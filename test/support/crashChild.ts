/**
 * A workload for the crash tests, run in a child process that the test SIGKILLs
 * at random moments. It drives the engine with explicit idempotency keys and
 * prints one line per acknowledged call (`ack <kind> <taskId> <key>`), flushed
 * before the next call, so the parent knows exactly what was acknowledged.
 */
import { Engine } from '../../src/core/engine/engine';

async function main(): Promise<void> {
  const [workspace, runId, thresholdArg] = process.argv.slice(2);
  const engine = await Engine.open({
    workspace,
    owner: { id: `crash-${runId}`, pid: process.pid },
    store: { exportThresholdBytes: Number(thresholdArg ?? 16_384), lock: { waitMs: 5_000 } },
  });
  const say = (line: string) => process.stdout.write(line + '\n');
  say('ready');
  const tasks: { id: string; next: number }[] = [];
  let i = 0;
  const worker = async (w: number) => {
    for (;;) {
      const key = `${runId}-${w}-${i++}`;
      const r = Math.random();
      if (tasks.length === 0 || r < 0.2) {
        const t = await engine.startTask({
          goal: `goal ${key}`,
          plan: [
            { id: 'a', title: 'A' },
            { id: 'b', title: 'B', dependsOn: ['a'] },
          ],
          idempotencyKey: key,
        });
        tasks.push({ id: t.taskId, next: 0 });
        say(`ack task ${t.taskId} ${key}`);
      } else {
        const t = tasks[Math.floor(Math.random() * tasks.length)];
        if (r < 0.55 && t.next < 2) {
          const stepId = t.next === 0 ? 'a' : 'b';
          try {
            await engine.startStep({ taskId: t.id, stepId, idempotencyKey: `${key}-s`, inputs: { key } });
            say(`ack step ${t.id} ${key}-s`);
            await engine.completeStep({ taskId: t.id, stepId, outputs: { key }, idempotencyKey: `${key}-c` });
            say(`ack step ${t.id} ${key}-c`);
            t.next++;
          } catch {
            t.next = 2; // another worker raced us on this task: leave it
          }
        } else {
          const b = await engine.beginSideEffect({ taskId: t.id, key, kind: 'shell', description: `effect ${key}` });
          if (b.decision === 'proceed') say(`ack effect ${t.id} ${key}`);
          if (Math.random() < 0.5) {
            await engine.endSideEffect({ taskId: t.id, key, ok: true, result: { key }, idempotencyKey: `${key}-e` });
            say(`ack step ${t.id} ${key}-e`);
          }
        }
      }
    }
  };
  await Promise.all([worker(0), worker(1), worker(2)]);
}

main().catch((e) => {
  process.stderr.write(`crash child failed: ${(e as Error).stack}\n`);
  process.exit(3);
});
