// Mocha root hooks: one session for the whole suite, and an end-state screenshot of
// every scenario (passed or failed) so a person can look at what the test saw.
import type { Page } from 'playwright-core';
import { screenshotPath, startSession, stopSession } from './session';

/** The page a scenario is driving; scenarios set it so the hook can photograph it. */
export const current: { page?: Page } = {};

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(300_000);
    await startSession();
  },
  async afterEach(this: Mocha.Context) {
    const page = current.page;
    current.page = undefined;
    if (!page) return;
    const title = this.currentTest?.fullTitle() ?? 'scenario';
    await page.screenshot({ path: screenshotPath(title) }).catch(() => undefined);
    await page.close();
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopSession();
  },
};
