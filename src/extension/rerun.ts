/**
 * Runs `work` one at a time: a call while it runs gets that run's promise and asks for
 * one more run after it (however many calls came), so the last caller always sees a
 * run that started after its call — what a redraw of "the store as it is now" needs.
 */
export class OneMoreRun {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(
    private readonly work: () => Promise<void>,
    /** Stops the repeats (a disposed view has nothing to redraw). */
    private readonly stopped: () => boolean,
  ) {}

  run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.work();
      } while (this.again && !this.stopped());
    })().finally(() => (this.running = undefined));
    return this.running;
  }
}
