// Views across builds on a real numvald + workers (meson test `ui-trends`): the
// build compare form (with zero, one, two and three builds), the tolerance each
// side of a compare was judged by, the dashboard's regressions of the latest build,
// the per-test history chart and the flaky-case list.
//
// One test, exp fp32 [129] (normal inputs, one sample) on emufast, whose exp is a
// fast approximation (about 2 ULP), submitted on three builds with different
// tolerances:
//   trend 1.0: 8 ULP   -> passes
//   trend 1.1: 0.5 ULP -> fails   (newly failing against 1.0; the tolerance changed)
//   trend 1.2: 8 ULP   -> passes  (fixed against 1.1; the tolerance changed back)
//
// The compare tolerances, GET /api/v1/history and GET /api/v1/flaky are checked
// against the server. What an older numvald answers (no "tolerance" in compare
// entries, 404 for history and flaky) and what this run cannot produce (a flaky
// case: emu is deterministic) are given to the page through page.route, built from
// this run's real builds and cases in the documented shapes (docs/API.md).
//
//   cd tests/browser && node --test trends.mjs

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import {fileURLToPath} from 'node:url';
import {startService, stopService, api, waitJob, prerequisites, shown, visit} from './service.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const {root: ROOT, chromium: CHROMIUM, bins: BINS, skip: SKIP} = prerequisites(HERE);

const SPEC = {kind: 'op', op: 'exp', dtypes: ['fp32'], shapes: [[129]], layouts: ['contiguous'], inputs: ['normal'],
  samples: 1, seed: 21};
const tol = (max_ulp, why) => ({metric: 'ulp', max_ulp, reason_code: 'approximation_error', reason: `browser trends: ${why}`});
const RUNS = [
  {build: {name: 'trend', version: '1.0', commit: 'aaaa000011112222'}, tolerance: tol(8, 'fast exp within 8 ULP')},
  {build: {name: 'trend', version: '1.1', commit: 'bbbb000011112222'}, tolerance: tol(0.5, 'correctly rounded exp')},
  {build: {name: 'trend', version: '1.2', commit: 'cccc000011112222'}, tolerance: tol(8, 'fast exp within 8 ULP')},
];

let svc = null;
let browser = null;
let page = null;
const jobs = [];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'numval-trends-'));
process.on('exit', () => fs.rmSync(tmp, {recursive: true, force: true}));

async function shot(name) {
  fs.mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function submit(i) {
  const r = await api(svc, 'POST', '/jobs', {...SPEC, build: RUNS[i].build, tolerance: RUNS[i].tolerance, device: 'emufast'},
    svc.submitToken);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const job = await waitJob(svc, r.body.job.id, 60000);
  const c = (await api(svc, 'GET', `/jobs/${job.id}/cases?limit=1`)).body.cases[0];
  jobs[i] = {job, case: (await api(svc, 'GET', `/cases/${c.id}`)).body.case};
  return jobs[i];
}

async function builds() {
  return (await api(svc, 'GET', '/builds')).body.builds;
}

before(async () => {
  if (SKIP) return;
  svc = await startService({bins: BINS, dir: tmp, root: ROOT});
  const {chromium} = await import('playwright-core');
  browser = await chromium.launch({executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true});
  const ctx = await browser.newContext({viewport: {width: 1280, height: 860}});
  page = await ctx.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
}, {timeout: 60000});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (svc) await stopService(svc);
  fs.rmSync(tmp, {recursive: true, force: true});
});

test('no build yet: the compare form is there and says why it cannot compare', {skip: SKIP}, async () => {
  assert.equal((await builds()).length, 0);
  await visit(page, svc.url + '/#/builds');
  const form = page.locator('#compare-form');
  await form.waitFor();
  assert.equal(await page.locator('#compare-note').innerText(), 'Compare needs two builds; 0 registered.');
  assert.equal(await form.locator('button[type=submit]').isDisabled(), true);
  await visit(page, svc.url + '/');
  assert.match(await page.locator('#dash-reg').innerText(), /needs two builds; 0 registered/);
});

test('one build: the form shows it, the dashboard explains the missing predecessor', {skip: SKIP}, async () => {
  const {job} = await submit(0);
  assert.equal(job.state, 'passed', JSON.stringify(job));
  await visit(page, svc.url + '/#/builds');
  assert.equal(await page.locator('#compare-note').innerText(), 'Compare needs two builds; 1 registered.');
  assert.equal(await page.locator('#c-head option').count(), 1);
  assert.equal(await page.locator('#compare-form button[type=submit]').isDisabled(), true);
  await visit(page, svc.url + '/');
  assert.match(await page.locator('#dash-reg').innerText(), /needs two builds; 1 registered/);
});

test('two builds: the dashboard lists the newly failing case of the latest build, linked', {skip: SKIP}, async () => {
  const {job, case: c} = await submit(1);
  assert.equal(job.state, 'failed', JSON.stringify(job));
  const [head, base] = await builds();
  assert.equal(head.identity.version, '1.1');
  assert.equal(base.identity.version, '1.0');
  await visit(page, svc.url + '/');
  const rows = page.locator('#dash-regressions tbody tr');
  await rows.first().waitFor();
  assert.equal(await rows.count(), 1);
  assert.match(await page.locator('#dash-reg-pair').innerText(), /trend 1\.1 .* against its predecessor trend 1\.0/);
  assert.match(await rows.first().innerText(), /^exp · fp32 · \[129\] · contiguous · normal/);
  const link = rows.first().getByRole('link');
  assert.equal(await link.getAttribute('href'), `#/cases/${c.id}`);
  await shot('20-dashboard-regressions');
  await shown(page, `/cases/${c.id}`, () => link.click());
});

test('three builds: builds page defaults to the newest against its predecessor', {skip: SKIP}, async () => {
  const {job} = await submit(2);
  assert.equal(job.state, 'passed', JSON.stringify(job));
  const [b3, b2] = await builds();
  await visit(page, svc.url + '/#/builds');
  assert.equal(await page.locator('#compare-note').count(), 0);
  assert.equal(await page.locator('#c-base').inputValue(), b2.id);
  assert.equal(await page.locator('#c-head').inputValue(), b3.id);
  await shown(page, new RegExp(`^/compare\\?base=${b2.id}&head=${b3.id}$`),
    () => page.locator('#compare-form button[type=submit]').click());
  // Nothing newly fails on 1.2: the dashboard says "none".
  await visit(page, svc.url + '/');
  assert.match(await page.locator('#dash-reg-none').innerText(), /^None: no case newly fails \(1 matched/);
});

test('compare by version strings selects those builds and shows each side\'s tolerance', {skip: SKIP}, async () => {
  const all = await builds();
  const byVersion = (v) => all.find((b) => b.identity.version === v).id;
  await visit(page, svc.url + '/#/compare?base=1.0&head=1.1');
  assert.equal(await page.locator('#c-base').inputValue(), byVersion('1.0'));
  assert.equal(await page.locator('#c-head').inputValue(), byVersion('1.1'));
  // Hashes and names resolve the same way (a name: the newest build with it).
  await visit(page, svc.url + `/#/compare?base=${byVersion('1.1')}&head=trend`);
  assert.equal(await page.locator('#c-base').inputValue(), byVersion('1.1'));
  assert.equal(await page.locator('#c-head').inputValue(), byVersion('1.2'));
  await visit(page, svc.url + '/#/compare?base=9.9&head=1.2');
  assert.match(await page.locator('#compare-unknown').innerText(), /No build '9\.9' for base/);
  // numvald's own 404, naming the build it does not know.
  assert.match(await page.locator('#cmp-error').innerText(), /^404: .*9\.9/);

  const r = (await api(svc, 'GET', '/compare?base=1.0&head=1.1')).body;
  assert.equal(r.newly_failing.length, 1);
  await visit(page, svc.url + '/#/compare?base=1.0&head=1.1');
  const row = page.locator('#cmp-failing tbody tr');
  assert.equal(await row.count(), 1);
  // Each side as the server sends it: the tolerance its case was judged by, 8 ULP on
  // 1.0 and 0.5 ULP on 1.1 (job tolerances: no stored version), so the row is marked.
  const nf = r.newly_failing[0];
  assert.deepEqual([nf.base.tolerance.max_ulp, nf.head.tolerance.max_ulp], [8, 0.5]);
  assert.equal(await row.locator('td.tol-base').innerText(), '≤ 8 ULP');
  assert.equal(await row.locator('td.tol-head').innerText(), '≤ 0.5 ULP');
  assert.equal(await row.getAttribute('data-tol-changed'), 'true');
  assert.match(await row.locator('td').first().innerText(), /tolerance changed$/);
  assert.match(await row.locator('td.tol-head').getAttribute('title'), /approximation_error: browser trends: correctly rounded/);
  assert.match(await page.locator('section', {has: page.locator('#cmp-failing')}).locator('.tol-note').innerText(),
    /1 of these were judged by a different tolerance/);
  await shot('21-compare-versions');
  // 1.2 fixed it (0.5 ULP back to 8): listed as fixed, marked the same way.
  await visit(page, svc.url + '/#/compare?base=1.1&head=1.2');
  const fixed = page.locator('#cmp-fixed tbody tr');
  assert.equal(await fixed.count(), 1);
  assert.deepEqual([await fixed.locator('td.tol-base').innerText(), await fixed.locator('td.tol-head').innerText()],
    ['≤ 0.5 ULP', '≤ 8 ULP']);
  assert.equal(await fixed.getAttribute('data-tol-changed'), 'true');
  await shot('22-compare-tolerances');
});

test('compare from a numvald without tolerances: each side reads "—", nothing marked', {skip: SKIP}, async () => {
  await page.route('**/api/v1/compare?**', async (route) => {
    // The real answer in full (not a 304 for what the page has cached), less "tolerance".
    const headers = {...route.request().headers()};
    delete headers['if-none-match'];
    const body = await (await route.fetch({headers})).json();
    const strip = (side) => { if (side) delete side.tolerance; return side; };
    for (const k of ['newly_failing', 'newly_passing', 'drift']) body[k].forEach((e) => { strip(e.base); strip(e.head); });
    await route.fulfill({json: body});
  });
  try {
    await visit(page, svc.url + '/#/compare?base=1.0&head=1.1');
    const row = page.locator('#cmp-failing tbody tr');
    assert.equal(await row.count(), 1);
    assert.equal(await row.locator('td.tol-base').innerText(), '—');
    assert.equal(await row.locator('td.tol-head').innerText(), '—');
    assert.equal(await row.getAttribute('data-tol-changed'), 'false');
    assert.equal(await page.locator('.tol-note').count(), 0);
  } finally {
    await page.unroute('**/api/v1/compare?**');
  }
});

// The history query of this run's test, as the case page links it.
function historyQuery(c) {
  return new URLSearchParams({op: c.op, dtype: c.dtype, shape: JSON.stringify(c.shape), layout: c.layout,
    input: c.input, device: c.device});
}

test('history chart from the server: one point per build, failed ones marked, linked to their cases', {skip: SKIP}, async () => {
  const c = jobs[2].case;
  const q = historyQuery(c);
  const real = await api(svc, 'GET', `/history?${q}`);
  assert.equal(real.status, 200, JSON.stringify(real.body));
  await visit(page, svc.url + `/#/cases/${c.id}`);
  let asked = null;
  const onReq = (r) => { if (r.url().includes('/api/v1/history?')) asked = new URL(r.url()).searchParams; };
  page.on('request', onReq);
  await shown(page, /^\/history\?/, () => page.getByRole('link', {name: 'History across builds'}).click());
  page.off('request', onReq);
  // The view asked for the case's whole key.
  assert.deepEqual(Object.fromEntries(asked), Object.fromEntries(q));
  const pts = real.body.points;
  // This run's three builds, oldest first: passed, failed, passed.
  assert.deepEqual(pts.map((p) => [p.identity.version, p.verdict, p.case_id]),
    jobs.map((j, i) => [RUNS[i].build.version, j.case.verdict, j.case.id]));
  assert.deepEqual(jobs.map((j) => j.case.verdict), ['passed', 'failed', 'passed']);
  // One dot per build, linking to its case; the failed one drawn with a cross.
  const dots = page.locator('#history-chart svg a.point');
  assert.deepEqual(await dots.evaluateAll((as) => as.map((a) => [a.getAttribute('href'), a.dataset.verdict,
    a.querySelectorAll('.fail-mark').length])),
  pts.map((p) => [`#/cases/${p.case_id}`, p.verdict, p.verdict === 'failed' ? 1 : 0]));
  // x: the builds' versions, oldest first. The same error on every build (same device,
  // same inputs): the dots sit at one height while the verdicts differ.
  assert.deepEqual(await page.locator('#history-chart svg text.tick.x').evaluateAll((ts) => ts.map((t) => t.textContent)),
    ['1.0', '1.1', '1.2']);
  assert.equal(new Set(pts.map((p) => p.max_ulp)).size, 1);
  const ys = await dots.evaluateAll((as) => as.map((a) => a.querySelector('circle').getAttribute('cy')));
  assert.equal(new Set(ys).size, 1, `equal errors, equal heights: ${ys}`);
  const rows = page.locator('#history-points tbody tr');
  assert.deepEqual(await rows.evaluateAll((rs) => rs.map((r) => [r.dataset.build, r.dataset.verdict])),
    pts.map((p) => [p.build_id, p.verdict]));
  // Each build's tolerance: 8, 0.5, 8 ULP, drawn as the "allowed" line and listed.
  assert.deepEqual(await rows.evaluateAll((rs) => rs.map((r) => r.children[4].textContent)),
    ['≤ 8 ULP', '≤ 0.5 ULP', '≤ 8 ULP']);
  assert.equal(await page.locator('#history-chart svg g.series[data-name^="allowed"]').count(), 1);
  assert.equal(await page.locator('#history-key').innerText(), 'exp · fp32 · [129] · contiguous · normal · on emufast');
  assert.match(await page.locator('#history-chart figcaption').innerText(), /on 3 builds \(1 failed\)$/);
  await shot('23-history');
  // A dot is a link (and keyboard-focusable): it opens that build's case.
  await dots.nth(1).focus();
  await shown(page, `/cases/${pts[1].case_id}`, () => page.keyboard.press('Enter'));
});

test('history from a numvald without the route: the 404 said plainly, the page intact', {skip: SKIP}, async () => {
  await page.route('**/api/v1/history?**', (route) => route.fulfill({status: 404,
    json: {error: {code: 'not_found', message: 'no route GET /api/v1/history'}}}));
  try {
    await visit(page, svc.url + `/#/cases/${jobs[0].case.id}`);
    await shown(page, /^\/history\?/, () => page.getByRole('link', {name: 'History across builds'}).click());
    assert.equal(await page.locator('h1').innerText(), 'History across builds');
    assert.match(await page.locator('#history-error').innerText(), /answered 404 \(no route GET \/api\/v1\/history\)/);
    assert.equal(await page.locator('#history-form input[name=op]').inputValue(), 'exp');
  } finally {
    await page.unroute('**/api/v1/history?**');
  }
});

test('flaky view from the nav: the server\'s list', {skip: SKIP}, async () => {
  const real = await api(svc, 'GET', '/flaky?limit=100');
  await visit(page, svc.url + '/');
  await shown(page, '/flaky', () => page.locator('#nav').getByRole('link', {name: 'Flaky'}).click());
  assert.equal(await page.locator('h1').innerText(), 'Flaky cases');
  assert.equal(real.status, 200, JSON.stringify(real.body));
  // Nothing in this run is flaky (emu is deterministic: the gate reproduced case 1.1's
  // failure every run), so the server's list is empty and the page says so.
  assert.deepEqual(real.body.flaky, []);
  assert.equal(jobs[1].case.flaky, false);
  assert.equal(await page.locator('#main p.empty').innerText(), 'No flaky cases.');
});

test('flaky view on a numvald without the route: the 404 said plainly', {skip: SKIP}, async () => {
  await page.route('**/api/v1/flaky?**', (route) => route.fulfill({status: 404,
    json: {error: {code: 'not_found', message: 'no route GET /api/v1/flaky'}}}));
  try {
    await visit(page, svc.url + '/#/flaky');
    assert.match(await page.locator('#flaky-error').innerText(), /answered 404 \(no route GET \/api\/v1\/flaky\)/);
  } finally {
    await page.unroute('**/api/v1/flaky?**');
  }
});

test('flaky view with the documented answer: rates and links', {skip: SKIP}, async () => {
  const c = jobs[1].case;
  const entry = (rr, rate) => ({case_id: c.id, job_id: c.job_id, op: c.op, dtype: c.dtype, shape: c.shape,
    input: c.input, layout: c.layout, device: c.device, signature: c.signature ? c.signature.id : 'f'.repeat(64),
    repro_rate: rr, rate, created_at: '2026-12-01T10:00:00.000Z'});
  let limit = null;
  await page.route('**/api/v1/flaky?**', (route) => {
    limit = new URL(route.request().url()).searchParams.get('limit');
    return route.fulfill({json: {flaky: [entry({runs: 5, failed: 2, bit_identical: 3}, 0.4),
      entry({runs: 8, failed: 1, bit_identical: 8}, 0.125)]}});
  });
  try {
    await visit(page, svc.url + '/#/flaky');
    assert.equal(limit, '100');
    const rows = page.locator('#flaky tbody tr');
    assert.equal(await rows.count(), 2);
    const cells = await rows.first().locator('td').allInnerTexts();
    assert.equal(cells[0], `case ${c.id}`);
    assert.equal(cells[1], `#${c.job_id}`);
    assert.equal(cells[2], 'exp · fp32 · [129] · contiguous · normal');
    assert.equal(cells[4], '40% (2 of 5 runs failed)');
    assert.equal(cells[5], '3 of 5');
    assert.equal(await rows.nth(1).locator('td.rate').innerText(), '12.5% (1 of 8 runs failed)');
    assert.equal(await rows.first().getByRole('link', {name: `case ${c.id}`}).getAttribute('href'), `#/cases/${c.id}`);
    await shot('24-flaky');
    await page.setViewportSize({width: 390, height: 844});
    await visit(page, svc.url + '/#/flaky');
    const over = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
    assert.ok(over <= 1, `flaky view scrolls sideways by ${over}px at phone width`);
    await page.setViewportSize({width: 1280, height: 860});
  } finally {
    await page.unroute('**/api/v1/flaky?**');
  }
});
