// Headless Chromium for the console's tests: Debian's chromium (scripts/install-deps.sh) driven by
// playwright-core (tests/e2e/package.json), which downloads no browser of its own.
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.WARDEN_CHROMIUM || '/usr/bin/chromium';

/** Launches headless Chromium; fails loudly when it is not installed. */
export async function launchChromium() {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: install Debian's chromium (scripts/install-deps.sh) or set WARDEN_CHROMIUM`);
  }
  // Chromium's own sandbox refuses to run as root; the tests run as root on CI.
  const args = process.getuid?.() === 0 ? ['--no-sandbox'] : [];
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args });
}
