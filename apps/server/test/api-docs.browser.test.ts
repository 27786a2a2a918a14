// The interactive API docs (/api/docs) in real headless Chromium, on a development server
// (no PUBLIC_URL) reached at 127.0.0.1 — the address `npm start` prints while the stand-in
// public URL says localhost (issue 37, finding 8). The page must run under the app's own
// Content-Security-Policy, name Paddock rather than Swagger, and offer the page's own
// origin as the server, so "Try it out" is same-origin and carries the session cookie.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Browser, chromium } from 'playwright-core';
import { freePort } from '../src/db/embedded.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { CHROMIUM } from './helpers/browser.ts';

const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

let t: TestApp;
let browser: Browser;
let origin: string;
before(async () => {
  const port = await freePort();
  t = await buildTestApp({ env: { PORT: String(port), HOST: '127.0.0.1' } });
  await t.app.listen({ host: '127.0.0.1', port });
  origin = `http://127.0.0.1:${port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS, headless: true });
});
after(async () => {
  await browser?.close();
  await t?.close();
});

describe('/api/docs in Chromium on 127.0.0.1', () => {
  it('loads with no CSP violation, names Paddock, and offers the page origin as the server', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    // A violation report from inside the page, for what the console line may not carry.
    await page.addInitScript(
      "document.addEventListener('securitypolicyviolation', (e) => console.error(`securitypolicyviolation ${e.violatedDirective} ${e.blockedURI}`));",
    );
    const response = await page.goto(`${origin}/api/docs`);
    assert.equal(response?.status(), 200);
    // The app's own policy (plugins/security.ts), not one of the docs' own.
    assert.match((await response?.headerValue('content-security-policy')) ?? '', /frame-ancestors 'none'/);
    await page.locator('.opblock').first().waitFor();
    await page.locator('.servers select').waitFor();

    assert.match(await page.title(), /Paddock/);
    assert.doesNotMatch(await page.title(), /Swagger/);
    // No Swagger topbar (its logo links to swagger.io).
    assert.equal(await page.locator('.topbar').count(), 0);
    assert.equal(await page.locator('a[href*="swagger.io"]').count(), 0);

    const servers = await page.locator('.servers select option').allTextContents();
    assert.deepEqual(
      servers.map((s) => s.trim()),
      [origin],
    );
    assert.deepEqual(problems, []);
    await context.close();
  });
});
