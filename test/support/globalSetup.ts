import { buildCli } from './mcp';

/**
 * Runs once in mocha's main process before any test file, serial or --parallel. The
 * built CLI (dist/) is made here, once: with parallel workers each building it on its
 * own, one worker's esbuild would rewrite dist/cli.js while another's test runs it.
 * Workers inherit this process's environment when the pool starts them, so the flag
 * tells their buildCli() that dist/ is already current.
 */
export function mochaGlobalSetup(): void {
  buildCli();
  process.env.WAYPOINT_TEST_CLI_BUILT = '1';
}
