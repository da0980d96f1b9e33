/** Rolls a task back to a checkpoint; the crash test SIGKILLs it somewhere inside. */
import { Engine } from '../../src/core/engine/engine';

async function main(): Promise<void> {
  const [workspace, taskId, checkpointId] = process.argv.slice(2);
  const engine = await Engine.open({ workspace, store: { lock: { waitMs: 5000 } } });
  process.stdout.write('ready\n');
  await engine.rollback({ taskId, checkpointId });
  await engine.close();
}
main().catch((e) => {
  process.stderr.write(String((e as Error).stack));
  process.exit(3);
});
