/** Takes a bulk checkpoint (stored raw, then compressed in the background) and closes; the crash test SIGKILLs it somewhere inside. */
import { Engine } from '../../src/core/engine/engine';

async function main(): Promise<void> {
  const [workspace, taskId] = process.argv.slice(2);
  const engine = await Engine.open({ workspace, store: { lock: { waitMs: 5000 } } });
  process.stdout.write('ready\n');
  const cp = await engine.checkpoint({ taskId });
  process.stdout.write(`ack ${cp.checkpointId}\n`);
  await engine.close(); // waits for the compaction
  process.stdout.write('closed\n');
}
main().catch((e) => {
  process.stderr.write(String((e as Error).stack));
  process.exit(3);
});
