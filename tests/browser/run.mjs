// Browser tests of the web UI against the real thing: a numvald on 127.0.0.1 (free
// port, temp data dir) supervising real emu workers, real jobs submitted over the
// API, Debian's chromium driven headless by playwright-core.
//
//   cd tests/browser && npm ci && node --test run.mjs      (or: meson test --suite browser)
//
// Binaries come from $NUMVAL_BUILD_DIR (meson passes its build dir), else ../../build-web,
// else ../../build. Exits 77 (meson's "skipped") when chromium, playwright-core or
// the binaries are missing; under `node --test` the tests are reported as skipped instead.
// Screenshots of every view go to tests/browser/screenshots/ (gitignored).

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import crypto from 'node:crypto';
import {execFileSync} from 'node:child_process';
import {fileURLToPath} from 'node:url';
import {startService, stopService, api, waitJob, prerequisites, shown, visit} from './service.mjs';
import {num} from '../../web/app/util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const {root: ROOT, chromium: CHROMIUM, bins: BINS, skip: SKIP} = prerequisites(HERE);

// The failing job's tolerance: exp on a device whose transcendentals are a fast
// approximation, judged at 0.5 ULP (correct rounding, IEEE 754-2019 §9.2
// recommends it for exp): the approximation cannot meet it, so cases fail.
const TIGHT_REASON = 'browser test: exp must be correctly rounded (0.5 ULP) on this device';
const FAIL_SPEC = {
  kind: 'op', op: 'exp', dtypes: ['fp32'], shapes: [[257]], layouts: ['contiguous'],
  inputs: ['normal', 'uniform'], samples: 1, seed: 7,
  tolerance: {metric: 'ulp', max_ulp: 0.5, reason_code: 'approximation_error', reason: TIGHT_REASON},
};
// The passing job: add is exact then rounded once (IEEE 754-2019 §5.4.1), so a
// correct device is within 0.5 ULP and the shipped default tolerance holds.
const PASS_SPEC = {
  kind: 'op', op: 'add', dtypes: ['fp32'], shapes: [[64]], layouts: ['contiguous'],
  inputs: ['normal'], samples: 1, seed: 3,
};
// A job with enough cases to need paging (25 pages of 100): add over 5 input
// classes x 500 samples.
const MANY_SPEC = {
  kind: 'op', op: 'add', dtypes: ['fp32'], shapes: [[4]], inputs: ['normal', 'uniform', 'near_zero',
    'large', 'specials'], samples: 500, seed: 11,
};
const MANY_CASES = 5 * 500;
const BUILD = {name: 'browser-rt', version: '1.2.3', commit: 'c0ffee0123456789'};
// The base build of the compare view: the same exp job on the correctly rounded
// emu0 passes, so comparing it with BUILD (emufast) lists newly failing cases.
const BASE_BUILD = {name: 'browser-base', version: '1.2.2', commit: 'bead0123456789ab'};
// A small attention block (docs/JOBS.md "Fused jobs") run on a device whose fused
// region rounds intermediates to bf16: the region promises fp32 intermediates, so
// the QK^T matmul 's' is the first value outside its tolerance (JOBS.md "emu's
// fused mode": the scaling 'z' stays within, 'p' diverges after it).
const FUSED_SPEC = {
  kind: 'fused', name: 'attention-small',
  graph: {inputs: [{name: 'q', shape: [64, 16]}, {name: 'kT', shape: [16, 64]}, {name: 'v', shape: [64, 16]},
    {name: 'inv_sqrt_d', shape: [64, 64], value: 0.25}],
  nodes: [{name: 's', op: 'matmul', inputs: ['q', 'kT']}, {name: 'z', op: 'mul', inputs: ['s', 'inv_sqrt_d']},
    {name: 'p', op: 'softmax', inputs: ['z'], attrs: {axis: -1}}, {name: 'o', op: 'matmul', inputs: ['p', 'v']}],
  outputs: ['o']},
  dtypes: ['bf16'], inputs: ['normal'], seed: 5,
};
// A small long-run job: an MLP trained 60 steps over 3 seeds under fp16 AMP with
// dynamic gradient scaling (about 0.6 s on emu; the scale starts at 2^16 and
// grows every 20 clean steps, so a few steps overflow and are skipped),
// submitted without a device so any worker may claim it.
const LONGRUN_SPEC = {
  kind: 'longrun', name: 'mlp-small-fp16', model: 'mlp', sizes: {in: 8, hidden: 16, classes: 4},
  data: {seed: 7, eval_examples: 128}, steps: 60, batch: 16, n_seeds: 3, seed: 1, log_every: 2,
  optimizer: {name: 'adamw', lr: 0.01}, amp: {dtype: 'fp16'},
  grad_scaler: {init_scale: 65536, growth_factor: 2, backoff_factor: 0.5, growth_interval: 20},
};

let svc = null;
let browser = null;
let page = null;
let passJob = null;
let failJob = null;
let manyJob = null;
let baseJob = null;
let fusedJob = null;
let longJob = null;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'numval-browser-'));
process.on('exit', () => fs.rmSync(tmp, {recursive: true, force: true}));

async function shot(name) {
  fs.mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

before(async () => {
  if (SKIP) return;
  fs.rmSync(SHOTS, {recursive: true, force: true}); // this run's views only
  svc = await startService({bins: BINS, dir: tmp, root: ROOT});
  const base = await api(svc, 'POST', '/jobs', {...FAIL_SPEC, build: BASE_BUILD, device: 'emu0'}, svc.submitToken);
  assert.equal(base.status, 201, JSON.stringify(base.body));
  const a = await api(svc, 'POST', '/jobs', {...PASS_SPEC, build: BUILD, device: 'emu0'}, svc.submitToken);
  const b = await api(svc, 'POST', '/jobs', {...FAIL_SPEC, build: BUILD, device: 'emufast'}, svc.submitToken);
  assert.equal(a.status, 201, JSON.stringify(a.body));
  assert.equal(b.status, 201, JSON.stringify(b.body));
  const c = await api(svc, 'POST', '/jobs', {...MANY_SPEC, device: 'emu0'}, svc.submitToken);
  assert.equal(c.status, 201, JSON.stringify(c.body));
  const f = await api(svc, 'POST', '/jobs', {...FUSED_SPEC, build: BUILD, device: 'emufused'}, svc.submitToken);
  assert.equal(f.status, 201, JSON.stringify(f.body));
  const l = await api(svc, 'POST', '/jobs', LONGRUN_SPEC, svc.submitToken);
  assert.equal(l.status, 201, JSON.stringify(l.body));
  baseJob = await waitJob(svc, base.body.job.id, 60000);
  fusedJob = await waitJob(svc, f.body.job.id, 60000);
  longJob = await waitJob(svc, l.body.job.id, 60000);
  passJob = await waitJob(svc, a.body.job.id, 60000);
  failJob = await waitJob(svc, b.body.job.id, 60000);
  manyJob = await waitJob(svc, c.body.job.id, 60000);
  const {chromium} = await import('playwright-core');
  browser = await chromium.launch({executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true});
  const ctx = await browser.newContext({viewport: {width: 1280, height: 860}, acceptDownloads: true});
  page = await ctx.newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
}, {timeout: 90000});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (svc) await stopService(svc);
  fs.rmSync(tmp, {recursive: true, force: true});
});

test('the worker really ran both jobs', {skip: SKIP}, () => {
  assert.equal(passJob.state, 'passed', `pass job: ${JSON.stringify(passJob)}`);
  assert.equal(failJob.state, 'failed', `fail job: ${JSON.stringify(failJob)}`);
  assert.ok(failJob.cases_failed > 0);
});

test('a large job opens with one page of cases and pages with a cursor', {skip: SKIP}, async () => {
  assert.equal(manyJob.state, 'passed', JSON.stringify(manyJob));
  assert.equal(manyJob.cases_total, MANY_CASES);
  const seen = [];
  const onReq = (r) => { if (/\/cases\?/.test(r.url())) seen.push(new URL(r.url()).searchParams); };
  page.on('request', onReq);
  await visit(page, svc.url + `/#/jobs/${manyJob.id}`);
  await page.locator('#cases-table').waitFor();
  // Server-side paging: what the table needed was one request for the first 100 cases.
  assert.equal(seen[0].get('limit'), '100');
  assert.equal(seen[0].get('cursor'), null);
  const rows = page.locator('#cases-table tbody tr');
  assert.equal(await rows.count(), 100);
  assert.equal(await rows.first().locator('td').first().innerText(), '#0');
  // The histogram scans every case in the background, in pages of at most 1000, and
  // says what it counts: the worker sends every case's element-wise distribution,
  // summed here over the cases (one count per element, not per case).
  // Each case of MANY_SPEC compares 4 elements, and its histogram counts each once
  // (checked on the first page of cases here).
  const firstPage = (await api(svc, 'GET', `/jobs/${manyJob.id}/cases?limit=1000`)).body.cases;
  assert.ok(firstPage.every((c) => c.ulp_histogram.counts.reduce((x, y) => x + y, 0) + c.ulp_histogram.nonfinite === 4));
  await page.locator('figcaption', {hasText: `ULP error of every element, ${num(4 * MANY_CASES)} elements in ${num(MANY_CASES)} cases`})
    .waitFor({timeout: 20000});
  assert.equal(await page.locator('#sec-per-case-maximum-ulp-error').innerText(), 'Element-wise ULP error');
  assert.ok(seen.slice(1).every((q) => Number(q.get('limit')) <= 1000));
  page.off('request', onReq);
  await shown(page, /[?&]cursor=/, () => page.getByRole('link', {name: 'Next cases ›'}).click());
  await page.locator('#cases-table tbody tr td', {hasText: /^#100$/}).waitFor();
  assert.equal(await rows.first().locator('td').first().innerText(), '#100');
  await shot('00-large-job');
});

// RFC 4180 read independently of web/app/csv.js: quoted fields may hold commas,
// doubled quotes and line breaks; records end in CRLF.
function parseCsv(text) {
  const rows = [];
  let row = [], field = '', i = 0, quoted = false;
  while (i < text.length) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') { field += '"'; i += 2; continue; }
      if (ch === '"') { quoted = false; i++; continue; }
      field += ch; i++; continue;
    }
    if (ch === '"' && field === '') { quoted = true; i++; continue; }
    if (ch === ',') { row.push(field); field = ''; i++; continue; }
    if (ch === '\r' && text[i + 1] === '\n') { row.push(field); rows.push(row); row = []; field = ''; i += 2; continue; }
    assert.ok(ch !== '\n' && ch !== '\r' && ch !== '"', `bare ${JSON.stringify(ch)} at ${i}: not RFC 4180`);
    field += ch; i++;
  }
  assert.equal(field, '', 'the last record ends in CRLF');
  assert.equal(row.length, 0, 'the last record ends in CRLF');
  return rows;
}

test('Download CSV: every case of the job over all pages, as RFC 4180', {skip: SKIP}, async () => {
  const seen = [];
  const onReq = (r) => { if (/\/cases\?/.test(r.url())) seen.push(new URL(r.url()).searchParams); };
  await visit(page, svc.url + `/#/jobs/${manyJob.id}`);
  await page.locator('#cases-table').waitFor();
  page.on('request', onReq);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', {name: 'Download CSV'}).click()]);
  page.off('request', onReq);
  assert.equal(dl.suggestedFilename(), `numval-job-${manyJob.id}-cases.csv`);
  const file = path.join(tmp, 'cases.csv');
  await dl.saveAs(file);
  const rows = parseCsv(fs.readFileSync(file, 'utf8'));
  const header = rows[0];
  assert.deepEqual(header.slice(0, 4), ['case_id', 'job_id', 'index', 'verdict']);
  // One record per case of the job (the table shows 100; the file has all of them).
  assert.equal(rows.length - 1, manyJob.cases_total);
  assert.ok(rows.every((r) => r.length === header.length), 'every record has every field');
  // Fetched through the cursor API in pages of 1000.
  assert.ok(seen.length >= Math.ceil(MANY_CASES / 1000) && seen.every((q) => q.get('limit') === '1000'));
  const col = (name) => header.indexOf(name);
  assert.deepEqual(rows.slice(1).map((r) => Number(r[col('index')])), [...Array(MANY_CASES).keys()]);
  assert.ok(rows.slice(1).every((r) => r[col('verdict')] === 'passed' && r[col('job_id')] === String(manyJob.id)));
  // Values as the API has them, full precision; the shape as JSON (quoted: it has no comma here).
  const first = (await api(svc, 'GET', `/jobs/${manyJob.id}/cases?limit=1`)).body.cases[0];
  assert.equal(rows[1][col('case_id')], String(first.id));
  assert.equal(rows[1][col('max_ulp')], String(first.max_ulp));
  assert.equal(rows[1][col('shape')], JSON.stringify(first.shape));
  assert.equal(rows[1][col('dtype')], 'fp32');
  await page.locator('#cases-csv + .action-status',
    {hasText: `${MANY_CASES} cases saved as numval-job-${manyJob.id}-cases.csv.`}).waitFor();
});

test('dashboard shows devices, builds and the failing job', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/');
  assert.equal(await page.locator('h1').innerText(), 'Dashboard');
  const devices = page.locator('#dash-devices');
  await devices.waitFor();
  assert.match(await devices.innerText(), /emu0/);
  assert.match(await devices.innerText(), /emufast/);
  const failures = page.locator('section', {has: page.locator('h2', {hasText: 'Recent failures'})});
  const link = failures.getByRole('link', {name: `#${failJob.id}`, exact: true});
  await link.waitFor();
  assert.match(await failures.innerText(), /op · exp/);
  assert.doesNotMatch(await failures.innerText(), new RegExp(`#${passJob.id}\\b`));
  assert.doesNotMatch(await failures.innerText(), new RegExp(`#${manyJob.id}\\b`));
  // Latest builds: the one build the pass, fail and fused jobs ran, with the cases they
  // passed and failed.
  const build = page.locator('#dash-builds tbody tr').first();
  await build.waitFor();
  const cells = await build.locator('td').allInnerTexts();
  assert.equal(cells[0], BUILD.name);
  assert.equal(cells[1], BUILD.version);
  assert.equal(Number(cells[3]), passJob.cases_passed + failJob.cases_passed + fusedJob.cases_passed);
  assert.equal(Number(cells[4]), passJob.cases_failed + failJob.cases_failed + fusedJob.cases_failed);
  // Regressions of the latest build: newly failing cases of the newest build against
  // the one before it, as GET /compare has them, each linking to its case.
  const builds = (await api(svc, 'GET', '/builds')).body.builds;
  assert.ok(builds.length >= 2, JSON.stringify(builds));
  const reg = (await api(svc, 'GET', `/compare?base=${builds[1].id}&head=${builds[0].id}`)).body;
  const regBox = page.locator('#dash-reg');
  await regBox.locator('#dash-reg-pair').waitFor();
  if (reg.newly_failing.length) {
    const rows = page.locator('#dash-regressions tbody tr');
    assert.equal(await rows.count(), Math.min(10, reg.newly_failing.length));
    assert.equal(await rows.first().locator('a').getAttribute('href'), `#/cases/${reg.newly_failing[0].head.case_id}`);
  } else {
    assert.match(await regBox.locator('#dash-reg-none').innerText(), /^None/);
  }
  await shot('01-dashboard');
});

test('dashboard updates live; a queued job is cancelled with a token', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/');
  const depth = page.locator('#queue-depth');
  await depth.waitFor();
  const before = Number(await depth.innerText());
  // A device no worker serves: the job stays queued until cancelled.
  const r = await api(svc, 'POST', '/jobs', {...PASS_SPEC, device: 'nowhere'}, svc.submitToken);
  assert.equal(r.status, 201);
  const id = r.body.job.id;
  // No reload: the poll must pick the new job up.
  await page.waitForFunction((n) => Number(document.querySelector('#queue-depth')?.textContent) === n,
    before + 1, {timeout: 10000});
  await visit(page, svc.url + `/#/jobs/${id}`);
  assert.match(await page.locator('h1').innerText(), /queued/);
  await page.click('#cancel-job');
  await page.locator('#token-dialog').waitFor({state: 'visible'});
  await page.fill('#token-input', svc.submitToken);
  await page.click('#token-dialog button[value=ok]');
  await page.locator('h1', {hasText: 'cancelled'}).waitFor({timeout: 5000});
  assert.equal((await api(svc, 'GET', `/jobs/${id}`)).body.job.state, 'cancelled');
  assert.equal(await page.locator('#cancel-job').isVisible(), false);
  await shot('02-job-cancelled');
  await page.evaluate(() => sessionStorage.clear());
});

test('jobs list filters by state', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/#/jobs');
  const rows = page.locator('#main table.data tbody tr');
  // base, pass, fail, many, fused, longrun and the cancelled one.
  assert.equal(await rows.count(), 7);
  await shown(page, /^\/jobs\?(.*&)?state=failed/, () => page.selectOption('#f-state', 'failed'));
  const failed = (await api(svc, 'GET', '/jobs?state=failed')).body.jobs.map((j) => String(j.id)).sort();
  const ours = [baseJob, passJob, failJob, manyJob, fusedJob, longJob];
  assert.deepEqual(failed, ours.filter((j) => j.state === 'failed').map((j) => String(j.id)).sort());
  assert.ok(failed.includes(String(failJob.id)) && failed.includes(String(fusedJob.id)));
  const listed = [];
  for (let i = 0; i < await rows.count(); i++) listed.push(await rows.nth(i).getAttribute('data-job'));
  assert.deepEqual(listed.sort(), failed);
  await shot('03-jobs-failed');
});

let caseId = null;

test('failing job -> its failed case, with metrics and histogram', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/');
  await shown(page, `/jobs/${failJob.id}`,
    () => page.getByRole('link', {name: `#${failJob.id}`, exact: true}).first().click());
  const h1 = await page.locator('h1').innerText();
  assert.match(h1, new RegExp(`Job #${failJob.id}`));
  assert.match(h1, /failed/);
  const table = page.locator('#cases-table');
  await table.waitFor();
  assert.equal(await table.locator('tbody tr').count(), failJob.cases_total);
  assert.equal(await table.locator('tbody tr[data-verdict="failed"]').count(), failJob.cases_failed);
  await page.locator('figure.chart canvas').waitFor();
  await shot('04-job');

  await shown(page, new RegExp(`^/jobs/${failJob.id}\\?(.*&)?verdict=failed`),
    () => page.getByRole('link', {name: 'failed', exact: true}).click());
  const failedRows = page.locator('#cases-table tbody tr');
  assert.equal(await failedRows.count(), failJob.cases_failed);
  const first = failedRows.first().locator('td a');
  const href = await first.getAttribute('href');
  caseId = /#\/cases\/(\d+)/.exec(href)[1];
  await shown(page, `/cases/${caseId}`, () => first.click());
});

test('case shows the first mismatch, the tolerance reason and the repro command', {skip: SKIP}, async () => {
  assert.ok(caseId, 'previous step found a failed case');
  const c = (await api(svc, 'GET', `/cases/${caseId}`)).body.case;
  assert.equal(c.verdict, 'failed');
  assert.match(await page.locator('h1').innerText(), /exp/);
  // The tolerance and its reason are the ones this job was submitted with.
  const tol = await page.locator('#tolerance').innerText();
  assert.match(tol, /≤ 0\.5 ULP/);
  assert.ok(tol.includes(TIGHT_REASON), tol);
  assert.match(tol, /approximation_error/);
  // First mismatching element: the page shows exactly what the worker recorded.
  const mm = c.first_mismatches[0];
  const row = page.locator('#mismatches tbody tr').first();
  const cells = await row.locator('td').allInnerTexts();
  assert.equal(cells[0], `[${mm.index.join(', ')}]`);
  assert.equal(cells[1], mm.inputs.map(String).join(', '));
  assert.equal(cells[3], String(mm.got));
  assert.equal(cells[5], String(mm.exact));
  assert.ok(Number(cells[7]) > 0.5, `ulp error ${cells[7]} exceeds the 0.5 ULP tolerance`);
  // Bit patterns in fp32, worked out here by the platform's own conversion (Float32Array
  // rounds to nearest even): the inputs and the device value are fp32 already; the
  // correctly rounded value is the exact one rounded to fp32.
  const f32 = (x) => `0x${new Uint32Array(new Float32Array([x]).buffer)[0].toString(16).padStart(8, '0')}`;
  assert.equal(cells[2], mm.inputs.map(f32).join(', '));
  assert.equal(cells[4], f32(mm.got));
  assert.equal(cells[6], f32(mm.exact));
  assert.notEqual(cells[4], cells[6], 'a mismatch beyond 0.5 ULP is not the correctly rounded value');
  const heads = await page.locator('#mismatches thead th').allInnerTexts();
  assert.deepEqual(heads.slice(0, 7), ['Index', 'Inputs', 'Input bits (fp32)', 'Device', 'Device bits (fp32)', 'Exact',
    'Correctly rounded bits (fp32)']);
  assert.match(await page.locator('.copyable code').innerText(), new RegExp(`numvalctl .*repro ${caseId}$`));
  await shot('05-case');
});

test('artifact download is the stored, content-addressed zstd container', {skip: SKIP}, async (t) => {
  const c = (await api(svc, 'GET', `/cases/${caseId}`)).body.case;
  if (!c.artifact) {
    t.skip('the worker stored no artifact for this case');
    return;
  }
  const [dl] = await Promise.all([page.waitForEvent('download'), page.locator('#artifact-link').click()]);
  const file = path.join(tmp, 'artifact.zst');
  await dl.saveAs(file);
  const bytes = fs.readFileSync(file);
  // zstd frame magic 0xFD2FB528, little-endian (RFC 8878 §3.1.1).
  assert.deepEqual([...bytes.subarray(0, 4)], [0x28, 0xb5, 0x2f, 0xfd]);
  assert.equal(crypto.createHash('sha256').update(bytes).digest('hex'), c.artifact);
  // The same bytes numvalctl fetches (it verifies the hash itself).
  const viaCtl = path.join(tmp, 'artifact-ctl.zst');
  execFileSync(BINS.ctl, ['--server', svc.url, 'artifact', c.artifact, '-o', viaCtl], {timeout: 15000});
  assert.ok(fs.readFileSync(viaCtl).equals(bytes));
});

test('case page: no stray "null", human labels, minimized artifact link, history link', {skip: SKIP}, async () => {
  const c = (await api(svc, 'GET', `/cases/${caseId}`)).body.case;
  await visit(page, svc.url + `/#/cases/${caseId}`);
  // No text node of #main itself (between its sections) and no line of the page reads "null".
  const stray = await page.evaluate(() => [...document.getElementById('main').childNodes]
    .filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim()).map((n) => n.textContent));
  assert.deepEqual(stray, []);
  assert.ok(!/(^|\n)\s*null\s*(\n|$)/.test(await page.locator('#main').innerText()), 'a line reads "null"');
  // Nothing on the page failed to draw (the tolerance's version history included:
  // exp fp32 has no stored version yet).
  assert.deepEqual(await page.locator('#main .error').allInnerTexts(), []);
  assert.match(await page.locator('#tol-history-box').innerText(), /^No stored versions/);
  // Every row label is words, none a raw key such as out_dtype or nan_mismatches.
  const labels = await page.locator('#main dl.kv dt').allInnerTexts();
  assert.deepEqual(labels.filter((l) => /_/.test(l)), []);
  assert.ok(c.out_dtype && labels.includes('Output dtype'), labels.join('|'));
  assert.ok(c.nan_mismatches !== undefined && labels.includes('NaN mismatches'), labels.join('|'));
  const summaries = await page.locator('#main details > summary').allInnerTexts();
  assert.deepEqual(summaries.filter((l) => /_/.test(l)), []);
  // The gate as the worker recorded it.
  if (c.repro_rate) {
    assert.equal(await page.locator('#repro-rate').innerText(),
      `${c.repro_rate.failed} of ${c.repro_rate.runs} runs failed, ${c.repro_rate.bit_identical} bit-identical`);
  }
  // The minimized artifact is a download of the stored bytes, like the artifact.
  if (c.minimized_artifact) {
    const a = page.locator('#minimized-artifact-link');
    assert.ok((await a.getAttribute('href')).endsWith(`/api/v1/artifacts/${c.minimized_artifact}`));
    const [dl] = await Promise.all([page.waitForEvent('download'), a.click()]);
    const file = path.join(tmp, 'minimized.zst');
    await dl.saveAs(file);
    assert.equal(crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex'), c.minimized_artifact);
  }
  // This test's history across builds: the link carries the case's whole key.
  const hl = page.getByRole('link', {name: 'History across builds'});
  const q = new URLSearchParams((await hl.getAttribute('href')).split('?')[1]);
  assert.deepEqual(Object.fromEntries(q), {op: c.op, dtype: c.dtype, shape: JSON.stringify(c.shape), layout: c.layout,
    input: c.input, device: c.device});
  await shown(page, /^\/history\?/, () => hl.click());
  assert.equal(await page.locator('h1').innerText(), 'History across builds');
  // The one build this test ran on, its worst case this one (the view across three
  // builds: trends.mjs).
  const hist = await api(svc, 'GET', `/history?${q}`);
  assert.equal(hist.status, 200, JSON.stringify(hist.body));
  assert.deepEqual(hist.body.points.map((p) => [p.identity.name, p.verdict]), [[BUILD.name, 'failed']]);
  const rows = page.locator('#history-points tbody tr');
  assert.equal(await rows.count(), 1);
  assert.equal(await rows.first().getAttribute('data-verdict'), 'failed');
  assert.equal(await page.locator('#history-chart svg a.point[data-verdict="failed"]').getAttribute('href'),
    `#/cases/${hist.body.points[0].case_id}`);
});

test('element-wise ULP histogram: drawn when cases carry one, labelled as such', {skip: SKIP}, async () => {
  // Other shapes a case may carry (docs: web/app/charts.js elementBins), given here
  // in the answers on the real case and the real job's cases.
  const HIST = {edges: [0, 0.5, 1, 2, 4], counts: [10, 100, 40, 5, 1, 0], nonfinite: 0};
  const add = async (route, f) => {
    const headers = {...route.request().headers()};
    delete headers['if-none-match'];
    const body = await (await route.fetch({headers})).json();
    await route.fulfill({json: f(body)});
  };
  await page.route(`**/api/v1/cases/${caseId}`, (r) => add(r, (b) => ({case: {...b.case, ulp_histogram: HIST}})));
  await page.route(`**/api/v1/jobs/${failJob.id}/cases?**`, (r) => add(r, (b) =>
    ({...b, cases: b.cases.map((c) => ({...c, ulp_histogram: HIST}))})));
  try {
    await visit(page, svc.url + `/#/cases/${caseId}`);
    const fig = page.locator('#element-histogram figure');
    assert.equal(await fig.locator('figcaption').innerText(), 'ULP error of every element, 156 elements');
    const bins = await fig.locator('table.sr-table tr').evaluateAll((rs) => rs.slice(1).map((r) => r.textContent));
    // The empty bucket above the largest error ('>4': 0) is left out.
    assert.deepEqual(bins, ['010', '≤0.5100', '≤140', '≤25', '≤41', 'NaN/Inf0']);
    await visit(page, svc.url + `/#/jobs/${failJob.id}`);
    const n = failJob.cases_total;
    await page.locator('figcaption', {hasText: `ULP error of every element, ${156 * n} elements in ${n} cases`}).waitFor();
    assert.equal(await page.locator('#sec-per-case-maximum-ulp-error').innerText(), 'Element-wise ULP error');
  } finally {
    await page.unroute(`**/api/v1/cases/${caseId}`);
    await page.unroute(`**/api/v1/jobs/${failJob.id}/cases?**`);
  }
  // The real answer: the worker's fixed-edge distribution of this case's elements,
  // its empty buckets above the largest error left out, one count per element.
  const c = (await api(svc, 'GET', `/cases/${caseId}`)).body.case;
  const hst = c.ulp_histogram;
  assert.equal(hst.counts.reduce((a, b) => a + b, 0) + hst.nonfinite, c.compared);
  await visit(page, svc.url + `/#/cases/${caseId}`);
  const real = page.locator('#element-histogram figure');
  assert.equal(await real.locator('figcaption').innerText(), `ULP error of every element, ${num(c.compared)} elements`);
  const labels = await real.locator('table.sr-table tr').evaluateAll((rs) => rs.slice(1).map((r) => r.firstChild.textContent));
  assert.deepEqual(labels.slice(0, 5), ['0', '≤0.125', '≤0.25', '≤0.5', '≤1']);
  assert.equal(labels[labels.length - 1], 'NaN/Inf');
});

test('write actions ask for a token and show the server refusal', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/#/tolerances?op=exp&dtype=fp32');
  await page.fill('#t-op', 'exp');
  await page.fill('#t-dtype', 'fp32');
  await page.fill('#t-max-ulp', '4');
  await page.selectOption('#t-rc', 'approximation_error');
  // No reason: the server must refuse, and the page shows its own message.
  await page.click('#tol-form button[type=submit]');
  await page.locator('#token-dialog').waitFor({state: 'visible'});
  await page.fill('#token-input', 'not-a-real-token');
  await page.click('#token-dialog button[value=ok]');
  const status = page.locator('#tol-form .action-status');
  await status.filter({hasText: 'Refused'}).waitFor();
  assert.match(await status.innerText(), /401/);
  // With a real admin token but still no reason: refused with the server's reason.
  await page.click('#tol-form button[type=submit]');
  await page.locator('#token-dialog').waitFor({state: 'visible'});
  await page.fill('#token-input', svc.adminToken);
  await page.click('#token-dialog button[value=ok]');
  await status.filter({hasText: '400'}).waitFor();
  assert.match(await status.innerText(), /reason/i);
  await shot('06-tolerance-refused');
  // With a reason it becomes a new version, visible in the history.
  await page.fill('#t-reason', 'browser test: fast exp accepted on this device at 4 ULP');
  await page.click('#tol-form button[type=submit]');
  await page.locator('#tol-history').filter({hasText: 'fast exp accepted'}).waitFor();
  // Headroom: the failing exp cases used more than their 0.5 ULP (worst case first).
  const worst = page.locator('#tol-headroom tbody tr').first();
  await worst.waitFor();
  const cells = await worst.locator('td').allInnerTexts();
  assert.deepEqual(cells.slice(0, 3), ['exp', 'fp32', '≤ 0.5 ULP']);
  assert.equal(Number(cells[6]), failJob.cases_failed);
  assert.ok(parseFloat(cells[8]) > 100, `used ${cells[8]} of the allowed error`);
  await shot('07-tolerances');
});

test('devices, builds and suite views render', {skip: SKIP}, async () => {
  // A contract job on emu0 (fp32 only, a small sweep): its measured contract shows
  // beside the declared one; emufast has none yet.
  const cj = await api(svc, 'POST', '/jobs', {kind: 'contract', dtypes: ['fp32'], fp32_sweep: 256, device: 'emu0'},
    svc.submitToken);
  assert.equal(cj.status, 201, JSON.stringify(cj.body));
  const contractJob = await waitJob(svc, cj.body.job.id, 60000);
  assert.equal(contractJob.state, 'passed');
  await visit(page, svc.url + '/#/devices');
  assert.match(await page.locator('#device-emufast').innerText(), /transcendental=fast/);
  await page.locator('#measured-emu0 table.measured').waitFor();
  assert.match(await page.locator('#measured-emufast').innerText(), /No finished contract job yet/);
  const m = page.locator('#measured-emu0');
  assert.match(await m.innerText(), new RegExp(`Contract job #${contractJob.id} \\(passed\\)`));
  const ftz = (await m.locator('tbody tr', {has: page.locator('td', {hasText: /^ftz$/})}).innerText()).split('\t');
  assert.deepEqual(ftz.map((x) => x.trim()), ['fp32', 'ftz', 'kept (gradual underflow)', 'false', 'agrees']);
  const fma = (await m.locator('tbody tr', {has: page.locator('td', {hasText: /^fma$/})}).innerText()).split('\t');
  assert.deepEqual(fma.map((x) => x.trim()), ['fp32', 'fma', '—', 'fused', 'not judged']);
  assert.equal(await m.locator('td.bad').count(), 0);
  await shot('08-devices');
  await visit(page, svc.url + '/#/builds');
  assert.match(await page.locator('#builds').innerText(), new RegExp(`${BUILD.name}\\s+${BUILD.version}`));
  await shot('09-builds');
});

test('keyboard: the nav is reachable with Tab and follows with Enter', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/');
  await page.keyboard.press('Tab'); // skip link
  await page.keyboard.press('Tab'); // brand
  await page.keyboard.press('Tab'); // Dashboard
  await page.keyboard.press('Tab'); // Jobs
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Jobs');
  await shown(page, '/jobs', () => page.keyboard.press('Enter'));
  assert.equal(await page.locator('h1').innerText(), 'Jobs');
  // Live polling must not redraw unchanged data under a keyboard user's focus.
  await visit(page, svc.url + '/');
  const link = page.locator('section', {has: page.locator('h2', {hasText: 'Recent failures'})})
    .getByRole('link', {name: `#${failJob.id}`, exact: true});
  await link.focus();
  // Polling sends If-None-Match; numvald answers 304 while nothing changed. Wait for
  // two such answers (two poll rounds that found nothing new), not for a fixed time.
  const notModified = [];
  let seenTwo;
  const two = new Promise((r) => { seenTwo = r; });
  const onRes = (r) => {
    if (r.url().includes('/api/v1/') && r.status() === 304 && notModified.push(r.url()) >= 2) seenTwo();
  };
  page.on('response', onRes);
  const timer = new Promise((_, rej) => setTimeout(() => rej(new Error('fewer than two 304 polls in 20 s')), 20000));
  try {
    await Promise.race([two, timer]);
  } finally {
    page.off('response', onRes);
  }
  assert.ok(notModified.length >= 2, 'unchanged polls answered 304 Not Modified');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), `#${failJob.id}`);
  await shown(page, `/jobs/${failJob.id}`, () => page.keyboard.press('Enter'));
});

test('phone width: dashboard and case stay readable', {skip: SKIP}, async () => {
  await page.setViewportSize({width: 390, height: 844});
  await visit(page, svc.url + '/');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 1, `page scrolls sideways by ${overflow}px at phone width`);
  await shot('11-dashboard-phone');
  await visit(page, svc.url + `/#/cases/${caseId}`);
  await shot('12-case-phone');
  for (const route of [`/#/cases/${caseId}`, `/#/jobs/${failJob.id}`, '/#/builds', '/#/flaky',
    '/#/history?op=exp&dtype=fp32']) {
    await visit(page, svc.url + route);
    const over = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
    assert.ok(over <= 1, `${route} scrolls sideways by ${over}px at phone width`);
  }
  await page.setViewportSize({width: 1280, height: 860});
});

test('fused case: the graph with the first divergent node highlighted', {skip: SKIP}, async () => {
  assert.equal(fusedJob.state, 'failed', JSON.stringify(fusedJob));
  const list = (await api(svc, 'GET', `/jobs/${fusedJob.id}/cases?verdict=failed&limit=1`)).body.cases;
  assert.equal(list.length, 1);
  const c = (await api(svc, 'GET', `/cases/${list[0].id}`)).body.case;
  // What the worker judged (docs/JOBS.md "emu's fused mode"): 's' first, 'p' after it.
  assert.equal(c.first_divergent.node, 's');
  await visit(page, svc.url + `/#/jobs/${fusedJob.id}`);
  await shown(page, `/cases/${list[0].id}`, () => page.locator('#cases-table tbody tr a').first().click());
  const graph = page.locator('#fused-graph');
  await graph.waitFor();
  // One highlighted node in the diagram and in the table: the first divergent one.
  const hi = graph.locator('li.gnode.divergent');
  assert.equal(await hi.count(), 1);
  assert.equal(await hi.getAttribute('data-node'), c.first_divergent.node);
  assert.match(await hi.innerText(), /first divergent node/);
  assert.equal(await page.locator('#fused-nodes tbody tr.divergent').getAttribute('data-node'), c.first_divergent.node);
  // Layers: the graph inputs, then s, z, p, o one layer each (each reads the one before).
  const layers = await graph.locator(':scope > li').evaluateAll((ls) =>
    ls.map((l) => [...l.querySelectorAll('li.gnode')].map((n) => n.dataset.node)));
  assert.deepEqual(layers, [['q', 'kT', 'inv_sqrt_d', 'v'], ['s'], ['z'], ['p'], ['o']]);
  // Every node's state and local error as the API has them.
  const rows = page.locator('#fused-nodes tbody tr');
  assert.equal(await rows.count(), c.nodes.length);
  for (let i = 0; i < c.nodes.length; i++) {
    const n = c.nodes[i];
    assert.equal(await rows.nth(i).getAttribute('data-node'), n.name);
    assert.equal(await rows.nth(i).getAttribute('data-state'), n.state);
  }
  assert.deepEqual(c.nodes.map((n) => n.state), ['diverged', 'within_tolerance', 'diverged', 'within_tolerance']);
  const text = await page.locator('#first-divergent').innerText();
  assert.ok(text.includes(`max ${c.first_divergent.max_ulp} ULP`), text);
  // Its history across builds is keyed by the graph's name (the job's "name") as op,
  // and numvald finds this build's case under that key.
  const q = new URLSearchParams((await page.locator('#history-link').getAttribute('href')).split('?')[1]);
  assert.deepEqual([q.get('kind'), q.get('op'), q.get('dtype'), q.get('input')], ['fused', FUSED_SPEC.name, 'bf16', 'normal']);
  const hist = await api(svc, 'GET', `/history?${q}`);
  assert.equal(hist.status, 200, JSON.stringify(hist.body));
  assert.deepEqual(hist.body.points.map((p) => [p.identity.name, p.verdict, p.case_id]), [[BUILD.name, 'failed', c.id]]);
  await shot('14-fused-case');
});

test('long-run curve: loss per seed over the reference band, the verdict as the API says', {skip: SKIP}, async () => {
  assert.ok(['passed', 'failed'].includes(longJob.state), JSON.stringify(longJob));
  const job = (await api(svc, 'GET', `/jobs/${longJob.id}`)).body.job;
  const acc = job.result.acceptance;
  await visit(page, svc.url + `/#/jobs/${longJob.id}`);
  // The charts are inline SVG (web/app/svgchart.js): one group per series, each with its line.
  const svg = page.locator('#longrun-loss svg.line-chart');
  await svg.waitFor();
  assert.equal(await svg.locator('g.series path.line[d^="M"]').count(), 1 + LONGRUN_SPEC.n_seeds,
    'the loss chart drew its curves');
  // Legend: the reference band over its seeds and one dashed line per device seed.
  const legend = await page.locator('#longrun-loss ul.legend li').allInnerTexts();
  assert.equal(legend.length, 1 + LONGRUN_SPEC.n_seeds);
  assert.match(legend[0], new RegExp(`over ${LONGRUN_SPEC.n_seeds} seeds`));
  assert.equal(await page.locator('#longrun-verdict .badge').innerText(), acc.verdict);
  assert.equal(await page.locator('#longrun-verdict .reason').innerText(), acc.reason);
  const welch = await page.locator('#longrun-rules tr[data-rule=welch] td').first().innerText();
  assert.ok(welch.includes(`alpha = ${acc.final_loss.welch.alpha}`), welch);
  assert.equal(await page.locator('#longrun-skipped').innerText(), String(job.result.grad_scaler.skipped_steps));
  assert.equal(await page.locator('#longrun-finals tbody tr').count(), LONGRUN_SPEC.n_seeds);
  // The per-step record, decoded in the page (web/app/zstd.js) and here by the zstd CLI.
  const jsonl = execFileSync('zstd', ['-d', '-q', '-c'], {input: Buffer.from(job.result.series.data, 'base64')})
    .toString().trim().split('\n').map((l) => JSON.parse(l));
  const info = await page.locator('#longrun-series-info').innerText();
  assert.ok(info.startsWith(`Per-step record: ${jsonl.length} logged steps over ${LONGRUN_SPEC.n_seeds} reference ` +
    `and ${LONGRUN_SPEC.n_seeds} device runs`), info);
  assert.equal(await page.locator('#longrun-gradnorm svg g.series path.line[d^="M"]').count(), 1 + LONGRUN_SPEC.n_seeds,
    'gradient norm chart drawn');
  assert.equal(await page.locator('#longrun-scale svg g.series path.line[d^="M"]').count(), LONGRUN_SPEC.n_seeds,
    'loss scale chart drawn');
  const dev1 = jsonl.filter((r) => r.run === 'device' && r.seed === LONGRUN_SPEC.seed && r.skipped).map((r) => r.step);
  assert.match(await page.locator('#longrun-skipped-steps').innerText(),
    new RegExp(`seed ${LONGRUN_SPEC.seed}: ${dev1.length ? dev1.join(', ') : 'none'}(;|$)`));
  // Submitted without a device: the page names the device that claimed it.
  assert.equal(job.device, null);
  assert.ok(['emu0', 'emufast', 'emufused'].includes(job.leased_by), JSON.stringify(job));
  assert.equal(await page.locator('#ran-on').innerText(), `any; ran on ${job.leased_by}`);
  await shot('13-longrun');
});

test('build compare: newly failing exp cases between the two builds', {skip: SKIP}, async () => {
  assert.equal(baseJob.state, 'passed', JSON.stringify(baseJob));
  const builds = (await api(svc, 'GET', '/builds')).body.builds;
  const id = (b) => builds.find((x) => x.identity && x.identity.name === b.name).id;
  const r = (await api(svc, 'GET', `/compare?base=${id(BASE_BUILD)}&head=${id(BUILD)}`)).body;
  assert.equal(r.newly_failing.length, failJob.cases_failed);
  await visit(page, svc.url + `/#/compare?base=${id(BASE_BUILD)}&head=${id(BUILD)}`);
  const rows = page.locator('#cmp-failing tbody tr');
  assert.equal(await rows.count(), r.newly_failing.length);
  const cells = await rows.first().locator('td').allInnerTexts();
  assert.match(cells[0], /^exp · fp32 · \[257\] · contiguous · /);
  assert.match(cells[1], /passed/);
  assert.match(cells[2], /failed/);
  assert.match(await page.locator('#cmp-summary').innerText(), new RegExp(`Newly failing\\s+${r.newly_failing.length}`));
  // Both builds ran the exp job at the same 0.5 ULP: each side shows it (once the
  // server sends it), and no row is marked as a tolerance change.
  assert.deepEqual([r.newly_failing[0].base.tolerance.max_ulp, r.newly_failing[0].head.tolerance.max_ulp], [0.5, 0.5]);
  assert.equal(await rows.first().locator('td.tol-base').innerText(), '≤ 0.5 ULP');
  assert.equal(await rows.first().locator('td.tol-head').innerText(), '≤ 0.5 ULP');
  assert.equal(await page.locator('#cmp-failing tr.tol-changed').count(), 0);
  // The dropdowns select the two builds compared, not the newest twice.
  assert.equal(await page.locator('#c-base').inputValue(), id(BASE_BUILD));
  assert.equal(await page.locator('#c-head').inputValue(), id(BUILD));
  await shot('15-compare');
});

test('permanent suite: promoted cases, retire asks for a token and a reason', {skip: SKIP}, async (t) => {
  const list = (await api(svc, 'GET', '/suite')).body.suite;
  await visit(page, svc.url + '/#/suite');
  await shot('10-suite');
  if (!list.length) {
    t.skip('no failure was promoted to the suite in this run');
    return;
  }
  const rows = page.locator('#suite tbody tr');
  assert.equal(await rows.count(), list.length);
  const sc = list[0];
  const row = page.locator(`#suite tbody tr[data-suite-case="${sc.id}"]`);
  assert.equal(await row.locator('code').first().getAttribute('title'), sc.signature);
  assert.match(await row.innerText(), new RegExp(`job #${sc.origin_job}`));
  // No reason: the token dialog, then the server's own refusal.
  await page.evaluate(() => sessionStorage.clear());
  await row.locator('button[type=submit]').click();
  await page.locator('#token-dialog').waitFor({state: 'visible'});
  await page.fill('#token-input', svc.adminToken);
  await page.click('#token-dialog button[value=ok]');
  const status = row.locator('.action-status');
  await status.filter({hasText: '400'}).waitFor();
  assert.match(await status.innerText(), /reason/i);
  await row.locator('input[name=reason]').fill('browser test: retired with a reason');
  await row.locator('button[type=submit]').click();
  await page.waitForFunction((id) => !document.querySelector(`#suite tr[data-suite-case="${id}"]`), sc.id, {timeout: 5000});
  const after = (await api(svc, 'GET', `/suite/${sc.id}`)).body.suite_case;
  assert.equal(after.state, 'retired');
  assert.equal(after.retire_reason, 'browser test: retired with a reason');
  await visit(page, svc.url + '/#/suite?state=retired');
  assert.match(await page.locator(`#suite tr[data-suite-case="${sc.id}"]`).innerText(), /browser test: retired with a reason/);
  await shot('16-suite-retired');
  await page.evaluate(() => sessionStorage.clear());
});
