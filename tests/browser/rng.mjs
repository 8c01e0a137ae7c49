// Browser test of the RNG view (web/app/views/rng.js): a real numvald with its
// supervised emu workers runs the default job of suites/rng.json on emu (every
// check passes) and on emu's misbehaving modes (docs/JOBS.md "RNG jobs"):
// rng_restore=reuse (state and the dropouts' mask_from_state fail),
// rng_streams=overlap (seeding and streams fail, shift 256),
// rng_recompute=fresh (the recompute cases fail) and rng_threshold=fp8_e4m3
// (the keep rate of p = 0.1 is 0.875, not 0.9: its binomial test fails; p = 0.5
// is exact in fp8 and passes). Debian's chromium shows the job pages and a case
// page.
//
//   cd tests/browser && node --test rng.mjs      (or: meson test ui-rng)
//
// Expected shapes come from the API: one summary row per case, one test row per
// test, one keep-rate row per keep_rate test, one overlap row per window test,
// the figures as num() writes the API's values, the marked rows those the API
// says failed. Exits 77 (skipped) without chromium, playwright-core or the
// binaries.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import {fileURLToPath} from 'node:url';
import {startService, stopService, api, runJobs, prerequisites, visit, shown, openPage} from './service.mjs';
import {num} from '../../web/app/util.js';
import {checkTitle, figures, firstShared, keepRates, overlaps} from '../../web/app/views/rng.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const {root: ROOT, chromium: CHROMIUM, bins: BINS, skip: SKIP} = prerequisites(HERE);

let svc = null, browser = null, page = null;
const jobs = {};
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'numval-browser-rng-'));
process.on('exit', () => fs.rmSync(tmp, {recursive: true, force: true}));

function shipped() {
  const suite = JSON.parse(fs.readFileSync(path.join(ROOT, 'suites', 'rng.json'), 'utf8'));
  return {...suite.jobs.find((x) => x.name === 'rng-default')};
}

async function shot(name) {
  fs.mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function openJob(j) {
  await visit(page, svc.url + `/#/jobs/${j.id}`);
  await page.locator('#rng').waitFor();
}

const casesOf = async (j) => (await api(svc, 'GET', `/jobs/${j.id}/cases?limit=200`)).body.cases;
const rowCells = (rows, i) => rows.nth(i).locator('th, td').allInnerTexts();
const failedOf = (c) => c.tests.filter((t) => !t.passed).map((t) => t.name);

before(async () => {
  if (SKIP) return;
  svc = await startService({bins: BINS, dir: tmp, root: ROOT,
    devices: {emureuse: 'emu:rng_restore=reuse', emuoverlap: 'emu:rng_streams=overlap',
      emufresh: 'emu:rng_recompute=fresh', emuthr: 'emu:rng_threshold=fp8_e4m3'}});
  const want = {ok: 'emu0', reuse: 'emureuse', overlap: 'emuoverlap', fresh: 'emufresh', threshold: 'emuthr'};
  Object.assign(jobs, await runJobs(svc, Object.fromEntries(Object.entries(want)
    .map(([k, device]) => [k, {...shipped(), device}])), 120000));
  ({browser, page} = await openPage(CHROMIUM));
}, {timeout: 170000});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (svc) await stopService(svc);
  fs.rmSync(tmp, {recursive: true, force: true});
});

test('verdicts: each misbehaving mode fails, emu passes', {skip: SKIP}, () => {
  const st = Object.fromEntries(Object.entries(jobs).map(([k, j]) => [k, j.state]));
  assert.deepEqual(st, {ok: 'passed', reuse: 'failed', overlap: 'failed', fresh: 'failed', threshold: 'failed'});
});

test('every check with its tests and figures, as the API has them', {skip: SKIP}, async () => {
  const cs = await casesOf(jobs.ok);
  assert.equal(cs.length, 7, 'seeding, state, streams, then dropout and recompute for p = 0.1 and 0.5');
  await openJob(jobs.ok);
  const rows = page.locator('#rng-checks tbody tr');
  assert.equal(await rows.count(), cs.length);
  for (let i = 0; i < cs.length; i++) {
    const c = cs[i];
    assert.deepEqual(await rowCells(rows, i), [checkTitle(c), c.verdict, c.failure_class || '—',
      `${c.tests.length} of ${c.tests.length}`]);
  }
  assert.deepEqual(await page.locator('#rng-checks tbody th').allInnerTexts(), ['Seeding', 'State save and restore',
    'Parallel streams', 'Dropout, p = 0.1', 'Recomputation under activation checkpointing, p = 0.1',
    'Dropout, p = 0.5', 'Recomputation under activation checkpointing, p = 0.5']);
  for (const c of cs) {
    const tr = page.locator(`#rng-tests-${c.index} tbody tr`);
    assert.equal(await tr.count(), c.tests.length);
    for (let i = 0; i < c.tests.length; i++) {
      const t = c.tests[i];
      assert.deepEqual(await rowCells(tr, i), [t.name, 'yes', t.message, figures(t), t.why]);
    }
  }
  assert.equal(await page.locator('#rng tr.divergent').count(), 0);
  // The keep rate's binomial test: one row per keep_rate test, its figures.
  const keep = keepRates(cs);
  assert.equal(keep.length, 4, 'dropout and recompute, two p each');
  const kr = page.locator('#rng-keep-rate tbody tr');
  assert.equal(await kr.count(), keep.length);
  for (let i = 0; i < keep.length; i++) {
    const {c, d} = keep[i];
    assert.deepEqual(await rowCells(kr, i), [checkTitle(c), num(d.n), num(d.kept), num(d.expected),
      num(d.keep_rate), num(1 - c.p), num(d.z), num(d.p_value), num(d.alpha), 'yes']);
    assert.ok(d.p_value >= d.alpha, 'a passing keep rate has p-value >= alpha');
  }
  // Window overlap: seeding's different_seeds, state's stream_advances, streams' no_overlap.
  const ov = overlaps(cs);
  assert.deepEqual(ov.map(({t}) => t.name), ['different_seeds', 'stream_advances', 'no_overlap']);
  const orow = page.locator('#rng-overlap tbody tr');
  assert.equal(await orow.count(), ov.length);
  for (let i = 0; i < ov.length; i++) {
    const {c, t, d} = ov[i];
    assert.deepEqual(await rowCells(orow, i), [checkTitle(c), t.name, '0', 'none', num(d.false_alarm_bound), 'yes']);
  }
  // The state case's generator state size.
  const st = cs.find((c) => c.check === 'state');
  assert.match(await page.locator(`#rng-case-${st.index}`).innerText(), new RegExp(`${st.state_bytes} bytes`));
  // Accessible tables: a caption and column headers on each; no ULP histogram.
  const tables = page.locator('#rng table.data');
  const nt = await tables.count();
  assert.equal(nt, 3 + cs.length);
  for (let i = 0; i < nt; i++) {
    assert.ok((await tables.nth(i).locator('caption').innerText()).length > 10);
    assert.ok(await tables.nth(i).locator('thead th[scope="col"]').count() >= 4);
  }
  assert.equal(await page.locator('#sec-per-case-maximum-ulp-error').count(), 0);
  await shot('50-rng-passed');
});

test('restore that reuses the stream: state and the masks from a restored state fail', {skip: SKIP}, async () => {
  const cs = await casesOf(jobs.reuse);
  const failed = cs.filter((c) => c.verdict === 'failed');
  assert.deepEqual(failed.map((c) => c.check), ['state', 'dropout', 'dropout']);
  await openJob(jobs.reuse);
  assert.deepEqual(await page.locator('#rng-checks tr.divergent th').allInnerTexts(), failed.map(checkTitle));
  for (const c of failed) {
    const blk = page.locator(`#rng-case-${c.index}`);
    assert.equal(await blk.locator('.rng-class').innerText(), c.failure_class);
    assert.equal(await blk.locator('.rng-cause').innerText(), c.error);
    assert.deepEqual(await blk.locator('tr.divergent th').allInnerTexts(), failedOf(c));
  }
  const st = failed[0];
  assert.equal(st.failure_class, 'restore_reuses_stream');
  const t = st.tests.find((x) => x.name === 'restore_continues');
  const row = page.locator(`#rng-tests-${st.index} tr[data-test="restore_continues"]`);
  assert.deepEqual(await row.locator('th, td').allInnerTexts(), [t.name, 'no', t.message, figures(t), t.why]);
  assert.equal(figures(t), `${num(t.detail.differing)} differing, the first at ${num(t.detail.first)}`);
  await shot('51-rng-restore-reuse');
});

test('overlapping streams: the shared windows and where they first meet', {skip: SKIP}, async () => {
  const cs = await casesOf(jobs.overlap);
  assert.deepEqual(cs.filter((c) => c.verdict === 'failed').map((c) => [c.check, c.failure_class]),
    [['seeding', 'seeds_collide'], ['streams', 'streams_overlap']]);
  await openJob(jobs.overlap);
  const ov = overlaps(cs);
  const rows = page.locator('#rng-overlap tbody tr');
  assert.equal(await rows.count(), ov.length);
  for (let i = 0; i < ov.length; i++) {
    const {c, t, d} = ov[i];
    assert.deepEqual(await rowCells(rows, i), [checkTitle(c), t.name, num(d.shared_windows), firstShared(d.first),
      num(d.false_alarm_bound), t.passed ? 'yes' : 'no']);
  }
  const bad = ov.filter(({t}) => !t.passed);
  assert.ok(bad.length >= 2 && bad.every(({d}) => d.shared_windows > 0 && d.first.shift === -256),
    'seed s starts 256 words after seed s - 1: shift -256');
  assert.equal(await page.locator('#rng-overlap tr.divergent').count(), bad.length);
  assert.match(await page.locator('#rng-overlap tr.divergent td').nth(2).innerText(), /\(shift -256\)$/);
  await shot('52-rng-streams-overlap');
});

test('fresh numbers in the recomputation: the recompute cases fail', {skip: SKIP}, async () => {
  const cs = await casesOf(jobs.fresh);
  const failed = cs.filter((c) => c.verdict === 'failed');
  assert.deepEqual(failed.map((c) => [c.check, c.failure_class]),
    [['recompute', 'recompute_mismatch'], ['recompute', 'recompute_mismatch']]);
  await openJob(jobs.fresh);
  for (const c of failed) {
    assert.ok(failedOf(c).includes('recompute_replays'));
    assert.deepEqual(await page.locator(`#rng-case-${c.index} tr.divergent th`).allInnerTexts(), failedOf(c));
  }
  // The case page shows the case's own block.
  const c = failed[0];
  await shown(page, `/cases/${c.id}`, () => page.goto(svc.url + `/#/cases/${c.id}`));
  assert.equal(await page.locator('#rng h3').innerText(), checkTitle(c));
  assert.equal(await page.locator(`#rng-tests-${c.index} tbody tr`).count(), c.tests.length);
  assert.equal(await page.locator('#rng .rng-class').innerText(), c.failure_class);
  assert.equal(await page.locator('#rng-checks').count(), 0, 'one case: no summary table');
});

test('a keep rate off by 0.025: its binomial test fails, p = 0.5 passes', {skip: SKIP}, async () => {
  const cs = await casesOf(jobs.threshold);
  const keep = keepRates(cs);
  await openJob(jobs.threshold);
  const rows = page.locator('#rng-keep-rate tbody tr');
  assert.equal(await rows.count(), keep.length);
  for (let i = 0; i < keep.length; i++) {
    const {c, t, d} = keep[i];
    assert.equal(t.passed, c.p === 0.5, `p = ${c.p}: fp8 holds 0.5 exactly, not 0.9`);
    assert.equal(t.passed, d.p_value >= d.alpha);
    assert.deepEqual(await rowCells(rows, i), [checkTitle(c), num(d.n), num(d.kept), num(d.expected),
      num(d.keep_rate), num(1 - c.p), num(d.z), num(d.p_value), num(d.alpha), t.passed ? 'yes' : 'no']);
  }
  assert.deepEqual(await page.locator('#rng-keep-rate tr.divergent th').allInnerTexts(),
    keep.filter(({t}) => !t.passed).map(({c}) => checkTitle(c)));
  await shot('53-rng-keep-rate');
  // Phone width: the tables scroll in their wrapper, the page does not.
  await page.setViewportSize({width: 390, height: 800});
  const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  assert.equal(wide, false, 'no horizontal page scroll at 390 px');
  await page.setViewportSize({width: 1280, height: 860});
});

// The pure pieces, without a browser.
test('figures: each kind of detail in words, the rest as key = value', () => {
  assert.equal(figures({detail: {differing: 0, first: -1}}), '0 differing');
  assert.equal(figures({detail: {differing: 12, first: 3}}), '12 differing, the first at 3');
  assert.equal(figures({detail: {differing: 11754}}), '11754 differing');
  assert.equal(figures({detail: {shared_windows: 2, false_alarm_bound: 7.1e-15,
    first: {a: 'seed S', at_a: 256, b: 'seed S+1', at_b: 0, shift: -256}}}),
  '2 shared windows, the first: seed S at 256 = seed S+1 at 0 (shift -256); false-alarm bound 7.100e-15');
  assert.equal(figures({detail: {scale: 2}}), 'scale 2');
  assert.equal(figures({detail: {n: 100, kept: 90, expected: 89.5, keep_rate: 0.9, z: 0.17, p_value: 0.86,
    alpha: 1e-6}}), '90 of 100 kept (expected 89.5), z = 0.17, p-value 0.86, alpha 1.000e-6');
  assert.equal(figures({detail: {other: 1.5}}), 'other = 1.5');
  assert.equal(figures({}), '');
  assert.equal(checkTitle({check: 'dropout', p: 0.1}), 'Dropout, p = 0.1');
  assert.equal(checkTitle({check: 'seeding'}), 'Seeding');
  assert.equal(firstShared(undefined), 'none');
});
