// tests/browser/review.mjs — a reviewer confirms a memory candidate from the Temporal Web UI
// (2.42.x) in headless Chromium. Driven by browser_test.go, which starts `engram serve`,
// ingests an inferred preference and then checks the fact became ACTIVE.
//
// Environment:
//   UI_URL        the Temporal Web UI (ENGRAM_TEMPORAL_UI_URL)
//   NAMESPACE     Temporal namespace
//   TENANT        the tenant of the write (EngramTenant search attribute)
//   WORKFLOW_ID   the write workflow awaiting review
//   CANDIDATE_ID  the pending candidate
//   TEXT          the event's text, shown in the candidate's details
//   ARTIFACTS     folder for screenshots
//   CHROMIUM      the browser (default /usr/bin/chromium)
//   VIEWPORT_WIDTH, VIEWPORT_HEIGHT  the page's size (default 1280×720, Playwright's
//                 default page and a laptop's screen: the size the payload is checked at)
//
// The UI polls, so the script waits for elements, never for network idle. It prints one
// JSON line with the steps it completed; any failure exits 1 after saving failure.png.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name, def) => {
  const v = process.env[name] ?? def;
  if (v === undefined || v === '') {
    console.error(`review.mjs: ${name} is not set`);
    process.exit(2);
  }
  return v;
};
const ui = env('UI_URL').replace(/\/$/, '');
const ns = env('NAMESPACE', 'default');
const tenant = env('TENANT');
const workflowId = env('WORKFLOW_ID');
const candidate = env('CANDIDATE_ID');
const text = env('TEXT');
const artifacts = env('ARTIFACTS');
const steps = [];
const step = (s) => { steps.push(s); console.error(`[review.mjs] ${s}`); };

const profile = mkdtempSync(join(tmpdir(), 'engram-chromium-'));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: env('CHROMIUM', '/usr/bin/chromium'),
  headless: true,
  args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu', '--disable-component-update', '--no-first-run'],
  viewport: { width: Number(process.env.VIEWPORT_WIDTH ?? 1280), height: Number(process.env.VIEWPORT_HEIGHT ?? 720) },
});
const page = browser.pages()[0] ?? (await browser.newPage());
page.setDefaultTimeout(30_000);

try {
  // 1. The workflows list, filtered by the search attributes.
  const query = `EngramReview="PENDING" AND EngramTenant="${tenant}" AND WorkflowId="${workflowId}"`;
  const listURL = `${ui}/namespaces/${encodeURIComponent(ns)}/workflows?query=${encodeURIComponent(query)}`;
  await page.goto(listURL, { waitUntil: 'domcontentloaded' });
  const link = page.getByRole('link', { name: workflowId, exact: true }).first();
  // Visibility catches up with the search attribute within moments; reload until it has.
  for (let i = 0; ; i++) {
    try {
      await link.waitFor({ state: 'visible', timeout: 5_000 });
      break;
    } catch (e) {
      if (i >= 10) throw new Error(`workflow ${workflowId} not listed for ${query}`);
      await page.reload({ waitUntil: 'domcontentloaded' });
    }
  }
  step(`listed by ${query}`);

  // 2. Open the write workflow; its current details (rendered markdown, in an iframe)
  //    show the pending candidate.
  await link.click();
  await page.getByRole('tab', { name: /User Metadata/ }).click();
  const details = page.frameLocator('iframe[title="output"]');
  await details.getByText('memory candidate(s) await review').waitFor();
  await details.getByText(candidate).first().waitFor();
  await details.getByText(text).first().waitFor();
  step('read the pending candidate in the current details');
  await page.screenshot({ path: join(artifacts, 'review.png') });
  step('saved review.png');

  // 2b. The reviewer sees the payload to send without scrolling the details: with the
  //     page scrolled to the details frame, the JSON with the candidate id lies inside
  //     the frame's visible box (its own viewport, cut by every container of it that
  //     clips its overflow, the page's scrolling area included). The UI's frame is
  //     shorter than its content: what comes last is cut.
  const frame = page.locator('iframe[title="output"]');
  const visible = await frame.evaluate((el) => {
    el.scrollIntoView({ block: 'start' });
    const r = el.getBoundingClientRect();
    const box = { left: r.left + el.clientLeft, top: r.top + el.clientTop };
    box.right = box.left + el.clientWidth;
    box.bottom = box.top + el.clientHeight;
    for (let a = el.parentElement; a; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const q = a.getBoundingClientRect();
      box.left = Math.max(box.left, q.left);
      box.top = Math.max(box.top, q.top);
      box.right = Math.min(box.right, q.right);
      box.bottom = Math.min(box.bottom, q.bottom);
    }
    return box;
  });
  const inner = await details.locator('body').evaluate(() => {
    const d = document.scrollingElement;
    return { frameHeight: window.innerHeight, contentHeight: d.scrollHeight, scrollTop: d.scrollTop };
  });
  const payload = details.locator('code', { hasText: `"candidate_id": "${candidate}"` }).first();
  const box = await payload.boundingBox();
  const where = `payload at y ${Math.round(box.y - visible.top)}..${Math.round(box.y + box.height - visible.top)} of a visible details area ${Math.round(visible.bottom - visible.top)} px tall (frame ${inner.frameHeight} px for ${inner.contentHeight} px of content, scrolled ${inner.scrollTop})`;
  console.error(`[review.mjs] ${where}`);
  await page.screenshot({ path: join(artifacts, 'review-payload.png') });
  step('saved review-payload.png');
  const eps = 0.5;
  if (box.x < visible.left - eps || box.y < visible.top - eps || box.x + box.width > visible.right + eps || box.y + box.height > visible.bottom + eps) {
    throw new Error(`the review payload is clipped: ${where}`);
  }
  step(`the payload is inside the visible details area: ${where}`);

  // 3. More Actions → Send a Signal: signal `review`, JSON input, Submit.
  await page.getByRole('button', { name: 'More Actions' }).click();
  await page.getByRole('menuitem', { name: 'Send a Signal' }).click();
  const dialog = page.getByRole('dialog').filter({ hasText: 'Send a Signal' });
  await dialog.waitFor();
  await dialog.getByTestId('signal-select-button').click();
  await dialog.getByRole('option', { name: 'review', exact: true }).click();
  const editor = dialog.locator('.cm-content');
  await editor.click();
  await page.keyboard.insertText(JSON.stringify({ candidate_id: candidate, decision: 'confirm', reviewer: 'browser-test' }));
  // The editor reformats the JSON when it loses focus, and a click on Submit that only
  // blurs it does not submit: blur it first (a click on the form's "Encoding" text),
  // wait for the reformatted JSON, then submit once.
  await dialog.getByText('Encoding', { exact: true }).click();
  await dialog.locator('.cm-content', { hasText: '"reviewer": "browser-test"' }).waitFor();
  await page.screenshot({ path: join(artifacts, 'review-signal.png') });
  step('filled the signal form');
  const submit = dialog.getByTestId('confirm-modal-button');
  await submit.waitFor();
  await submit.click();
  try {
    await dialog.waitFor({ state: 'hidden', timeout: 15_000 });
  } catch (e) {
    throw new Error(`the signal form stayed open after Submit: ${await dialog.innerText()}`);
  }
  step('sent the review signal');

  // 4. The workflow leaves the review: its current details say so.
  await page.reload({ waitUntil: 'domcontentloaded' });
  await page.getByRole('tab', { name: /User Metadata/ }).click();
  await page.frameLocator('iframe[title="output"]').getByText('review finished').waitFor({ timeout: 60_000 });
  step('the details say: review finished');
  await page.screenshot({ path: join(artifacts, 'review-done.png') });
  console.log(JSON.stringify({ ok: true, steps }));
} catch (err) {
  await page.screenshot({ path: join(artifacts, 'failure.png') }).catch(() => {});
  console.log(JSON.stringify({ ok: false, steps, error: String(err?.message ?? err) }));
  process.exitCode = 1;
} finally {
  await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
