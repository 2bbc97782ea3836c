// What the Chromium tests share (dashboard.test.mjs, jupyterlab.test.mjs): launching Debian's
// Chromium through playwright-core with the flags this closed network needs, and polling until a
// condition holds. No test logic here.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

// Without the background-networking flags Chromium opens connections that this machine's closed
// network refuses, many at a time; QUIC and component updates likewise.
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Chromium at `executablePath` with a new empty profile, whose directory is pushed onto `temps`
 * for the caller to remove. */
export function launchChromium(executablePath, viewport, temps, prefix = "proctor-chromium-") {
  const profile = mkdtempSync(path.join(tmpdir(), prefix));
  temps.push(profile);
  return chromium.launchPersistentContext(profile, { executablePath, headless: true, args: FLAGS, viewport });
}

/** Calls `fn` every `everyMs` until it returns something truthy (thrown errors count as not
 * yet); throws naming `what` and the last answer after `ms`. */
export async function until(what, fn, ms, everyMs) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}
