// Debian's Chromium driven by playwright-core. Never `playwright install`: it
// downloads a browser build, which these machines cannot fetch.
import { chromium, type Browser } from 'playwright-core';
import { chromiumPath } from './versions';

const args = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-dev-shm-usage',
];

/** Playwright gives each launch a fresh temporary profile and kills its process group on close. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: chromiumPath, args, headless: true });
}
