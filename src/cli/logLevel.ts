import { Logger, type LogLevel } from '../core/log';
import { UsageError } from './args';

/**
 * The engine's log on a command's stderr. An ordinary command prints its answer, errors
 * and the warnings a person must act on or know (the store opened read-only on a full
 * disk, a torn journal tail dropped, an interrupted rollback finished). A task's own
 * moves the engine logs as warnings — its lease ran out, it waits for a person — are
 * recorded in the task and shown by `tasks`/`show`/`timeline`; on another command's
 * stderr they read as if that command had gone wrong, so they show only with
 * `--verbose` (info and up) or WAYPOINT_LOG=debug|info|warn|error.
 */
const LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

/** Warnings that are a task's recorded state change, not news about this command. */
const TASK_MOVE = /^\[engine\](?: \([^)]*\))? task \S+ (interrupted|waits for a person):/;

export function logLevelOf(verbose: boolean, env: NodeJS.ProcessEnv = process.env): { level: LogLevel; explicit: boolean } {
  const v = env.WAYPOINT_LOG?.trim().toLowerCase();
  if (v) {
    if (!(LEVELS as readonly string[]).includes(v)) throw new UsageError(`WAYPOINT_LOG must be one of ${LEVELS.join(', ')}, not '${env.WAYPOINT_LOG}'.`);
    return { level: v as LogLevel, explicit: true };
  }
  return verbose ? { level: 'info', explicit: true } : { level: 'warn', explicit: false };
}

export function cliLogger(verbose: boolean, write: (line: string) => void): Logger {
  const { level, explicit } = logLevelOf(verbose);
  const min = LEVELS.indexOf(level);
  return new Logger(
    (lvl, line) => {
      if (LEVELS.indexOf(lvl) < min) return;
      if (!explicit && lvl === 'warn' && TASK_MOVE.test(line)) return;
      write(line);
    },
    'core',
    'debug',
  );
}
