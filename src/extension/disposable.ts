import * as vscode from 'vscode';

/** Long-lived objects own their registrations and release them in reverse order. */
export abstract class Disposable implements vscode.Disposable {
  private readonly owned: vscode.Disposable[] = [];
  private disposed = false;

  protected register<T extends vscode.Disposable>(d: T): T {
    if (this.disposed) d.dispose();
    else this.owned.push(d);
    return d;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const d of this.owned.reverse()) {
      try {
        d.dispose();
      } catch {
        // one failing disposable must not keep the rest alive
      }
    }
    this.owned.length = 0;
  }
}
