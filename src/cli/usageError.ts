/** A usage error is its own class so the CLI can exit 2 for it and 1 for refusals. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}
