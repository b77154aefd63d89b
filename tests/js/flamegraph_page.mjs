// Checks a PyPerf flame graph page (--format flamegraph) in Debian's chromium,
// driven by playwright-core, through its real UI: hovers a node for its
// tooltip, clicks it to zoom, types into the search box. Used by
// tests/cc/support/flamegraph_page.cc (CheckFlameGraphPage).
//
// Usage: node flamegraph_page.mjs REQUEST_FILE
// REQUEST_FILE has lines "key=HEX" (HEX: the value's UTF-8 bytes in hex):
//   html=...        the page's path
//   path=...        one per node key, from the root's child down
//   search=...      the term typed into the search box ("" = none)
//   screenshot=...  a PNG to write (1280x720) with the tooltip shown ("" = none)
// Prints lines "key=value" (strings as HEX):
//   error=HEX            why the check could not run (then nothing else is sure)
//   console=HEX          a console error, page error, dialog or network request
//   found=0|1, samples=N, percent=P, zoomed=0|1, search_matches=N
//   label=HEX, tooltip=HEX  the node's box text and its tooltip's first line
//   collapsed=HEX COUNT  one per stack the page's data turns back into
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const hex = (s) => Buffer.from(String(s), 'utf8').toString('hex');
const unhex = (h) => Buffer.from(h, 'hex').toString('utf8');
const out = [];
const emit = (key, value) => out.push(key + '=' + value);

// How long any step may take. Users run the tests on busy hosts (CI shares
// its two cores), where chromium can be many times slower than on a quiet one;
// the checks never depend on how fast a step is, only on its result.
const PATIENCE_MS = 240000;
const request = { path: [], html: '', search: '', screenshot: '' };
for (const line of readFileSync(process.argv[2], 'utf8').split('\n')) {
  const eq = line.indexOf('=');
  if (eq < 0) continue;
  const key = line.slice(0, eq);
  const value = unhex(line.slice(eq + 1));
  if (key === 'path') request.path.push(value);
  else request[key] = value;
}

let browser;
try {
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], timeout: PATIENCE_MS });
  const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
  const url = pathToFileURL(request.html).href;
  page.on('console', (m) => { if (m.type() === 'error') emit('console', hex('console: ' + m.text())); });
  page.on('pageerror', (e) => emit('console', hex('page error: ' + e.message)));
  page.on('dialog', async (d) => {
    emit('console', hex('dialog (' + d.type() + '): ' + d.message()));
    await d.dismiss();
  });
  page.on('request', (r) => { if (r.url() !== url) emit('console', hex('request: ' + r.url())); });
  page.on('requestfailed', (r) => emit('console', hex('request failed: ' + r.url())));
  page.setDefaultTimeout(PATIENCE_MS);
  page.setDefaultNavigationTimeout(PATIENCE_MS);
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForFunction(() => window.pyperfFlameGraph !== undefined, null, { timeout: PATIENCE_MS });

  for (const [stack, count] of await page.evaluate(() => window.pyperfFlameGraph.collapsed()))
    emit('collapsed', hex(stack) + ' ' + count);
  // The kinds of the data's nodes, and the legend's keys as drawn.
  for (const kind of await page.evaluate(() => {
    const g = window.pyperfFlameGraph, kinds = new Set();
    for (let id = 0; id < g.nodeCount; id++) kinds.add(g.kind(id));
    return [...kinds];
  })) emit('kind', hex(kind));
  for (const key of await page.locator('#legend .key').all()) {
    if (!(await key.isVisible())) continue;
    emit('legend', hex((await key.getAttribute('data-kind')) + '\t' + (await key.textContent())));
  }

  const id = await page.evaluate((p) => window.pyperfFlameGraph.findPath(p), request.path);
  emit('found', id >= 0 ? 1 : 0);
  if (id >= 0) {
    const target = page.locator(`#graph .frame[data-node="${id}"]:not(.ancestor)`);
    // A node too narrow to draw: zoom into its ancestors by clicking them.
    for (let depth = 1; depth < request.path.length && (await target.count()) === 0; depth++) {
      const ancestor = await page.evaluate((p) => window.pyperfFlameGraph.findPath(p),
                                           request.path.slice(0, depth));
      const el = page.locator(`#graph .frame[data-node="${ancestor}"]:not(.ancestor)`);
      if ((await el.count()) > 0) await el.click();
    }
    if ((await target.count()) === 0) {
      emit('error', hex('the node is in the data but never drawn, even zoomed'));
    } else {
      await target.hover();
      await page.locator('#tooltip:not([hidden]) .tt-samples').waitFor({ timeout: PATIENCE_MS });
      emit('samples', (await page.locator('#tooltip .tt-samples').textContent()).trim());
      emit('percent', (await page.locator('#tooltip .tt-percent').textContent()).trim());
      emit('label', hex(await target.textContent()));
      emit('tooltip', hex(await page.locator('#tooltip .tt-label').textContent()));
      if (request.screenshot) await page.screenshot({ path: request.screenshot });
      await target.click();
      const box = await target.boundingBox();
      const graph = await page.locator('#graph').boundingBox();
      const zoomed = box && graph && Math.abs(box.x - graph.x) < 1 && Math.abs(box.width - graph.width) < 1;
      emit('zoomed', zoomed ? 1 : 0);
      await page.locator('#reset').click();
    }
  }
  if (request.search) {
    // Typed as a person types; the page searches once typing pauses, or at
    // Enter, which is pressed here so the result is there to read.
    await page.locator('#search').pressSequentially(request.search);
    await page.locator('#search').press('Enter');
    emit('search_matches', await page.locator('#status').getAttribute('data-matches'));
  }
} catch (e) {
  emit('error', hex(String(e && e.stack ? e.stack : e)));
} finally {
  if (browser) await browser.close();
}
process.stdout.write(out.join('\n') + '\n');
