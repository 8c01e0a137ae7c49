// Browser test of the serving view (web/app/views/serving.js): a real numvald
// with its supervised emu workers runs serving jobs of suites/serving.json
// (fp32, smaller prompt and context) on emu (long context and paged cache pass),
// emu:kv_cache=bf16 (prefill vs decode, long context and the paged cache fail: the
// first read of the narrowed cache, a recomputed token with its page) and
// emu:batch_splitk=on (batch invariance and sustained
// batching fail, naming the batch), and Debian's chromium shows the job pages and
// a case page. The repeated-sampling check is not built in the worker yet: a
// sampling case with its histogram is uploaded through the worker API by this
// test acting as the worker of a device no process serves, so the page renders a
// result numvald stored.
//
//   cd tests/browser && node --test serving.mjs      (or: meson test ui-serving)
//
// Expected shapes come from the API: one chart point and one table row per
// reported position, request or composition, the figures as num() writes the
// API's values, the marked rows those the API says differ. Exits 77 (skipped)
// without chromium, playwright-core or the binaries.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import {fileURLToPath} from 'node:url';
import {startService, stopService, api, runJobs, prerequisites, visit, shown, openPage} from './service.mjs';
import {num} from '../../web/app/util.js';
import {criterionOf} from '../../web/app/views/serving.js';
import {samplingBars, samplingOf} from '../../web/app/views/serving-sampling.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const {root: ROOT, chromium: CHROMIUM, bins: BINS, skip: SKIP} = prerequisites(HERE);

let svc = null, browser = null, page = null;
const jobs = {};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'numval-browser-serving-'));
process.on('exit', () => fs.rmSync(tmp, {recursive: true, force: true}));

function shipped(check) {
  const suite = JSON.parse(fs.readFileSync(path.join(ROOT, 'suites', 'serving.json'), 'utf8'));
  const j = suite.jobs.find((x) => x.check === check);
  delete j.description;
  j.dtypes = ['fp32'];
  if (check === 'prefill_decode') j.prompt = 12;
  if (check === 'long_context') Object.assign(j, {context: 128, every: 16});
  return j;
}

// A seeded repeated-sampling record: 16 tokens of a softmax over seeded logits,
// 4096 samples drawn from it by a seeded LCG, G = 2 sum O ln(O / E) over the
// tokens, df = tokens - 1. p is the fixture's (nothing here judges it): the page
// must show what was stored.
function samplingCase() {
  let x = 12345;
  const rnd = () => ((x = (1103515245 * x + 12345) % 2147483648) / 2147483648);
  const logits = Array.from({length: 16}, () => 3 * rnd());
  const z = logits.reduce((a, l) => a + Math.exp(l), 0);
  const prob = logits.map((l) => Math.exp(l) / z);
  const samples = 4096;
  const obs = new Array(16).fill(0);
  for (let i = 0; i < samples; i++) {
    let u = rnd(), k = 0;
    while (k < 15 && u >= prob[k]) u -= prob[k++];
    obs[k]++;
  }
  const histogram = prob.map((p, token) => ({token, observed: obs[token], expected: p * samples}));
  const g = 2 * histogram.reduce((a, b) => a + (b.observed ? b.observed * Math.log(b.observed / b.expected) : 0), 0);
  return {index: 0, op: 'serving', dtype: 'fp32', sample: 0, seed: 1, check: 'sampling', accumulator: 'fp32',
    criteria: {sampling: {passed: true, histogram, g, df: 15, p: 0.42, alpha: 0.001, samples, reproducible: true,
      tolerance: 'G-test p >= alpha', reason: 'fixture of the browser test'}},
    verdict: 'passed'};
}

async function uploadSampling() {
  const spec = {...shipped('batch'), name: 'sampling-fixture', device: 'sampler'};
  const r = await api(svc, 'POST', '/jobs', spec, svc.submitToken);
  assert.equal(r.status, 201, JSON.stringify(r.body));
  const claim = await api(svc, 'POST', '/worker/claim', {device: 'sampler', wait_ms: 5000, describe: {}},
    svc.adminToken);
  assert.equal(claim.status, 200, JSON.stringify(claim.body));
  assert.equal(claim.body.job.id, r.body.job.id);
  const c = samplingCase();
  const result = {verdict: 'passed', kind: 'serving', op: 'serving', check: 'sampling', backend: 'emu',
    device: 'emu', mode: null, contract: null, backend_build: null, build: null, seed: 1,
    decoder: spec.decoder, summary: {cases: 1, passed: 1, failed: 0, errors: 0}, cases: [c]};
  const up = await api(svc, 'POST', '/worker/result', {job_id: claim.body.job.id,
    lease_token: claim.body.job.lease_token, result}, svc.adminToken);
  assert.equal(up.status, 200, JSON.stringify(up.body));
  return up.body.job;
}

async function shot(name) {
  fs.mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function openJob(j) {
  await visit(page, svc.url + `/#/jobs/${j.id}`);
  await page.locator('#serving').waitFor();
}

const caseOf = async (j) => (await api(svc, 'GET', `/jobs/${j.id}/cases?limit=10`)).body.cases[0];
const rowCells = (rows, i) => rows.nth(i).locator('th, td').allInnerTexts();
const points = (sel) => page.locator(`${sel} svg g.series`).evaluateAll((gs) => gs.map((g) => Number(g.dataset.points)));

before(async () => {
  if (SKIP) return;
  svc = await startService({bins: BINS, dir: tmp, root: ROOT,
    devices: {emukv: 'emu:kv_cache=bf16', emusplit: 'emu:batch_splitk=on'}});
  const want = {pdKv: ['prefill_decode', 'emukv'], lcOk: ['long_context', 'emu0'], lcKv: ['long_context', 'emukv'],
    batchSplit: ['batch', 'emusplit'], sustSplit: ['sustained', 'emusplit'], pagedOk: ['paged', 'emu0'],
    pagedKv: ['paged', 'emukv']};
  Object.assign(jobs, await runJobs(svc, Object.fromEntries(Object.entries(want)
    .map(([k, [check, device]]) => [k, {...shipped(check), device}])), 120000));
  jobs.sampling = await uploadSampling();
  ({browser, page} = await openPage(CHROMIUM));
}, {timeout: 170000});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (svc) await stopService(svc);
  fs.rmSync(tmp, {recursive: true, force: true});
});

test('verdicts: each misbehaving mode fails its check, the correct mode passes', {skip: SKIP}, () => {
  const st = Object.fromEntries(Object.entries(jobs).map(([k, j]) => [k, j.state]));
  assert.deepEqual(st, {pdKv: 'failed', lcOk: 'passed', lcKv: 'failed', batchSplit: 'failed', sustSplit: 'failed',
    pagedOk: 'passed', pagedKv: 'failed', sampling: 'passed'});
});

test('prefill vs decode: per-position error and agreement plots, table, first position out of band', {skip: SKIP}, async () => {
  const c = await caseOf(jobs.pdKv);
  const pd = c.criteria.prefill_decode;
  const n = pd.per_position.length;
  await openJob(jobs.pdKv);
  assert.equal(await page.locator('#main dl.kv dd').nth(1).innerText(), 'serving · prefill-decode');
  assert.equal(await page.locator('#serving-check').innerText(), 'Prefill vs decode');
  assert.equal(await page.locator('#serving-class').innerText(), c.failure_class);
  assert.equal(await page.locator('#serving-cause').innerText(), c.error);
  assert.equal(await page.locator('#serving-tolerance').innerText(), pd.tolerance);
  assert.deepEqual(await points('#serving-error-chart'), [n, n, n, n]);
  assert.deepEqual(await points('#serving-agreement-chart'), [n]);
  const rows = page.locator('#serving-positions tbody tr');
  assert.equal(await rows.count(), n);
  for (let i = 0; i < n; i++) {
    const p = pd.per_position[i];
    assert.deepEqual(await rowCells(rows, i), [String(p.position), num(p.d), num(p.allowed), num(p.e_prefill),
      num(p.e_decode), num(p.e_dtype_ref), p.within ? 'yes' : 'no', p.same_top1 ? 'yes' : 'no']);
  }
  const out = pd.per_position.filter((p) => !p.within).map((p) => String(p.position));
  assert.ok(out.length > 0, 'the narrowed cache leaves the band somewhere');
  assert.deepEqual(await page.locator('#serving-positions tr.divergent th').allInnerTexts(), out);
  assert.equal(await page.locator('#serving-first-out').innerText(), out[0]);
  // The charts' text alternative: role img named by its title, described by its desc.
  const svg = page.locator('#serving-error-chart svg.line-chart');
  assert.equal(await svg.getAttribute('role'), 'img');
  const t = await page.locator(`#${await svg.getAttribute('aria-labelledby')}`).textContent();
  assert.match(t, /^Per position: distance between the cached decode and the prefill/);
  assert.match(await page.locator(`#${await svg.getAttribute('aria-describedby')}`).textContent(),
    new RegExp(`position from 0 to ${n - 1}`));
  // No ULP histogram: a serving case has no ULP metrics.
  assert.equal(await page.locator('#sec-per-case-maximum-ulp-error').count(), 0);
  await shot('40-serving-prefill-failed');
  // The case page shows the same view.
  await shown(page, `/cases/${c.id}`, () => page.locator('#serving-case-link').click());
  assert.equal(await page.locator('#serving-positions tbody tr').count(), n);
  assert.equal(await page.locator('#serving-class').innerText(), c.failure_class);
});

test('long context: error and band vs position, agreement, passed and failed', {skip: SKIP}, async () => {
  for (const [key, failed] of [['lcOk', false], ['lcKv', true]]) {
    const c = await caseOf(jobs[key]);
    const lc = c.criteria.long_context;
    const n = lc.points.length;
    await openJob(jobs[key]);
    assert.equal(await page.locator('#serving-check').innerText(), 'Long context');
    assert.deepEqual(await points('#serving-error-chart'), [n, n, n]);
    assert.deepEqual(await points('#serving-agreement-chart'), [n]);
    const rows = page.locator('#serving-points tbody tr');
    assert.equal(await rows.count(), n);
    for (let i = 0; i < n; i++) {
      const p = lc.points[i];
      assert.deepEqual(await rowCells(rows, i), [String(p.position), num(p.e_dev), num(p.e_dtype_ref), num(p.band),
        num(p.e_dev / p.band), num(p.agreement)]);
    }
    assert.equal(await page.locator('#serving-agreement').innerText(), num(lc.agreement));
    assert.equal(await page.locator('#serving-first-out').innerText(),
      lc.first_out_of_band === null ? 'none' : String(lc.first_out_of_band));
    assert.equal(lc.first_out_of_band !== null, failed);
    assert.equal(await page.locator('#serving-points tr.divergent').count(),
      lc.points.filter((p) => !(p.e_dev <= p.band)).length);
    await shot(`41-serving-long-${failed ? 'failed' : 'passed'}`);
  }
});

test('batch invariance: which composition changed what', {skip: SKIP}, async () => {
  const c = await caseOf(jobs.batchSplit);
  const b = c.criteria.batch;
  await openJob(jobs.batchSplit);
  assert.equal(await page.locator('#serving-check').innerText(), 'Batch invariance');
  assert.match(await page.locator('#serving-cause').innerText(), /^batch of 2 requests \(prompt lengths 16, 3\)/);
  const rows = page.locator('#serving-batch tbody tr');
  assert.equal(await rows.count(), b.compositions.length);
  for (let i = 0; i < b.compositions.length; i++) {
    const r = b.compositions[i];
    assert.deepEqual(await rowCells(rows, i), [String(r.requests), r.prompt_lengths.join(', '), r.layout,
      r.judged ? 'yes' : 'reported', num(r.values_differing),
      r.first_differing_step === null ? 'none' : num(r.first_differing_step),
      `${num(r.tokens_equal)} of ${num(b.steps)}`, num(r.max_rel_diff), r.passed ? 'passed' : 'failed']);
  }
  assert.equal(await page.locator('#serving-batch tr.divergent').count(),
    b.compositions.filter((r) => r.values_differing > 0).length);
  assert.ok(b.compositions.some((r) => r.values_differing > 0));
  await shot('42-serving-batch-failed');
});

test('sustained batching and paged cache: per request', {skip: SKIP}, async () => {
  const c = await caseOf(jobs.sustSplit);
  const sb = c.criteria.sustained;
  await openJob(jobs.sustSplit);
  assert.equal(await page.locator('#serving-cause').innerText(), c.error);
  let rows = page.locator('#serving-requests tbody tr');
  assert.equal(await rows.count(), sb.per_request.length);
  for (let i = 0; i < sb.per_request.length; i++) {
    const q = sb.per_request[i];
    assert.deepEqual(await rowCells(rows, i), [String(q.request), num(q.arrives), num(q.prompt), num(q.generates),
      num(q.values_differing), `${num(q.tokens_equal)} of ${num(q.generates)}`,
      q.first_differing_token === null ? 'none' : num(q.first_differing_token)]);
  }
  const bad = sb.per_request.filter((q) => q.values_differing > 0).length;
  assert.equal(await page.locator('#serving-requests tr.divergent').count(), bad);
  assert.match(await page.locator('#serving-sustained-summary').innerText(), new RegExp(`${bad} differ`));

  const pc = await caseOf(jobs.pagedOk);
  const pg = pc.criteria.paged;
  await openJob(jobs.pagedOk);
  assert.equal(await page.locator('#serving-check').innerText(), 'Paged KV cache');
  assert.equal(await page.locator('#serving-evictions').innerText(), num(pg.evictions));
  assert.equal(await page.locator('#serving-pages').innerText(), `${num(pg.pages)} pages of ${num(pg.page)} positions`);
  assert.equal(pg.rule, 'bits');
  assert.match(await page.locator('#serving-paged-rule').innerText(), /^bit for bit \(the device declares a sequential reduction order/);
  assert.equal(await page.locator('#serving-first-failure').count(), 0);
  rows = page.locator('#serving-requests tbody tr');
  assert.equal(await rows.count(), pg.per_request.length);
  for (let i = 0; i < pg.per_request.length; i++) {
    const q = pg.per_request[i];
    assert.deepEqual(await rowCells(rows, i), [String(q.request), num(q.prompt), num(q.evictions),
      num(q.recomputations), num(q.values_differing),
      q.first_differing_token === null ? 'none' : num(q.first_differing_token)]);
  }
  assert.equal(await page.locator('#serving-requests tr.divergent').count(), 0);
  assert.equal(await page.locator('#serving-cause').count(), 0);
  await shot('43-serving-paged-passed');

  const kc = await caseOf(jobs.pagedKv);
  const f = kc.criteria.paged.first_failure;
  await openJob(jobs.pagedKv);
  assert.equal(await page.locator('#serving-cause').innerText(), kc.error);
  assert.equal(await page.locator('#serving-first-failure').innerText(),
    `request ${num(f.request)}, token ${num(f.token)}, schedule step ${num(f.schedule_step)}, `
    + `position ${num(f.position)} in page ${num(f.page)} of ${num(kc.criteria.paged.page)} positions; `
    + `computed by a recomputation; ${num(f.values_differing)} values differ (bit for bit)`);
  await shot('43-serving-paged-failed');
});

test('repeated sampling: histogram vs reference from a stored case', {skip: SKIP}, async () => {
  const c = await caseOf(jobs.sampling);
  const s = c.criteria.sampling;
  assert.deepEqual(s, samplingCase().criteria.sampling, 'numvald stored the uploaded record as sent');
  await openJob(jobs.sampling);
  assert.equal(await page.locator('#serving-check').innerText(), 'Repeated sampling');
  assert.equal(await page.locator('#serving-gtest').innerText(),
    `G = ${num(s.g)}, df ${num(s.df)}, p = ${num(s.p)} at alpha ${num(s.alpha)} (consistent with the reference distribution)`);
  assert.equal(await page.locator('#serving-samples').innerText(), num(s.samples));
  assert.equal(await page.locator('#serving-reproducible').innerText(), 'yes');
  assert.equal(await page.locator('#serving-tolerance').innerText(), s.tolerance);
  const chart = page.locator('#serving-sampling-chart');
  assert.equal(await chart.locator('rect.bar').count(), s.histogram.length);
  assert.equal(await chart.locator('line.expected').count(), s.histogram.length);
  // Bar heights follow the observed counts (same order), expected marks their expected counts.
  const hs = await chart.locator('rect.bar').evaluateAll((rs) => rs.map((r) => Number(r.getAttribute('height'))));
  const obs = s.histogram.map((b) => b.observed);
  const top = obs.indexOf(Math.max(...obs));
  assert.equal(hs.indexOf(Math.max(...hs)), top);
  assert.equal(await chart.locator('svg.bar-chart').getAttribute('role'), 'img');
  // The data table, behind its disclosure as every chart's is.
  await chart.locator('details > summary').click();
  const rows = page.locator('#serving-sampling tbody tr');
  assert.equal(await rows.count(), s.histogram.length);
  for (let i = 0; i < s.histogram.length; i++) {
    const b = s.histogram[i];
    assert.deepEqual(await rowCells(rows, i), [String(b.token), num(b.observed), num(b.expected),
      num(b.observed - b.expected)]);
  }
  await shot('44-serving-sampling');
  // Phone width: the tables scroll in their wrapper, the page does not.
  await page.setViewportSize({width: 390, height: 800});
  const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(wide, false, 'no horizontal page scroll at 390 px');
  await page.setViewportSize({width: 1280, height: 860});
});

// The pure pieces, without a browser.
test('sampling bars: past 200 tokens, the 200 the reference expects most, in token order', () => {
  const hist = Array.from({length: 300}, (_, t) => ({token: 299 - t, observed: t, expected: (t * 7919) % 300}));
  const {bars, total} = samplingBars(hist);
  assert.equal(total, 300);
  assert.equal(bars.length, 200);
  assert.deepEqual(bars.map((b) => b.token), [...bars.map((b) => b.token)].sort((a, b) => a - b));
  // 7919 is prime to 300: the expected counts are 0..299 once each, the top 200 those >= 100.
  assert.deepEqual(bars.map((b) => b.token), hist.filter((b) => b.expected >= 100).map((b) => b.token)
    .sort((a, b) => a - b));
  assert.equal(samplingBars(hist.slice(0, 5)).bars.length, 5);
});

test('the criterion the case names; sampling under criteria or on the case', () => {
  const c = {op: 'serving', check: 'paged', criteria: {paged: {passed: true}}};
  assert.deepEqual(criterionOf(c), {name: 'paged', crit: {passed: true}});
  assert.equal(criterionOf({op: 'serving', check: 'batch'}), null);
  const smp = {histogram: [{token: 0, observed: 1, expected: 1}]};
  assert.equal(samplingOf({criteria: {sampling: smp}}), smp);
  assert.equal(samplingOf({sampling: smp}), smp);
  assert.equal(samplingOf({criteria: {sampling: {histogram: []}}}), null);
});
