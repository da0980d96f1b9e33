/**
 * A minimal structured logger. Lines carry their area (`[store] …`) and, where a
 * task is involved, its correlation id, so one task's story can be grepped from any
 * surface's log. Surfaces supply the sink (stderr for the CLI, an OutputChannel in
 * VS Code); the core never decides where text goes.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface LogSink {
  (level: LogLevel, line: string): void;
}

export class Logger {
  constructor(
    private readonly sink: LogSink,
    private readonly area = 'core',
    private readonly minLevel: LogLevel = 'info',
  ) {}

  child(area: string): Logger {
    return new Logger(this.sink, area, this.minLevel);
  }

  debug(msg: string, corr?: string | null): void {
    this.write('debug', msg, corr);
  }
  info(msg: string, corr?: string | null): void {
    this.write('info', msg, corr);
  }
  warn(msg: string, corr?: string | null): void {
    this.write('warn', msg, corr);
  }
  error(msg: string, corr?: string | null): void {
    this.write('error', msg, corr);
  }

  private write(level: LogLevel, msg: string, corr?: string | null): void {
    if (LEVELS[level] < LEVELS[this.minLevel]) return;
    this.sink(level, `[${this.area}]${corr ? ` (${corr})` : ''} ${msg}`);
  }
}

const LEVELS: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Collects lines in memory; used by tests and by callers that report warnings themselves. */
export function memorySink(into: { level: LogLevel; line: string }[]): LogSink {
  return (level, line) => into.push({ level, line });
}

export const silentLogger = new Logger(() => undefined);
