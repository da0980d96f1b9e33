/**
 * Applies a review and SIGKILLs itself where the commit would begin: the engine has
 * made its plan durable and written the files, and nothing after that happens.
 */
import { Engine } from '../../src/core/engine/engine';
import { applyReview } from '../../src/core/review/applyReview';

async function main(): Promise<void> {
  const [workspace, taskId, decisions] = process.argv.slice(2);
  const engine = await Engine.open({ workspace, store: { lock: { waitMs: 5000 } } });
  const crash = async (): Promise<never> => {
    process.kill(process.pid, 'SIGKILL');
    return new Promise<never>(() => undefined);
  };
  await applyReview(engine, { taskId, message: 'm', decisions: JSON.parse(decisions) }, { check: async () => undefined, commit: crash });
}
main().catch((e) => {
  process.stderr.write(String((e as Error).stack));
  process.exit(3);
});
