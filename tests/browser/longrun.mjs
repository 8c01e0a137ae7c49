// Browser test of the long-run job views: a real numvald with its supervised
// emu workers runs two tiny long-run jobs, Debian's chromium shows them.
//
//   cd tests/browser && node --test longrun.mjs      (or: meson test --suite browser)
//
// - a passing job: MLP, fp16 AMP under the dynamic gradient scaler, 3 seeds, 40 steps
//   logged every 4; deterministic (the default), so the first seed is repeated;
// - a failing one: fp16 without the scaler and loss_weight 2^-20, so the gradients
//   fall below fp16's smallest subnormal 2^-24 and flush to zero: the worker fails it
//   with failure_class "gradient_underflow" (docs/JOBS.md; the same construction as
//   tests/integration/test_longrun.py, AdamW eps 1e-16 so the reference trains as
//   without the weight).
// Expected shapes come from the specs (series = 1 reference band + one line per
// device seed; points = steps / log_every + 1); numbers shown come from the API.
// Exits 77 (skipped) without chromium, playwright-core or the binaries, like run.mjs.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import {execFileSync} from 'node:child_process';
import {fileURLToPath} from 'node:url';
import {startService, stopService, api, waitJob, prerequisites, visit} from './service.mjs';
import {num} from '../../web/app/util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const {root: ROOT, chromium: CHROMIUM, bins: BINS, skip: SKIP} = prerequisites(HERE);

const PASS_SPEC = {
  kind: 'longrun', model: 'mlp', sizes: {in: 8, hidden: 16, classes: 4},
  data: {seed: 7, eval_examples: 128}, steps: 40, batch: 16, n_seeds: 3, seed: 1, log_every: 4,
  optimizer: {name: 'adamw', lr: 0.01}, amp: {dtype: 'fp16'},
  grad_scaler: {init_scale: 65536, growth_factor: 2, backoff_factor: 0.5, growth_interval: 10},
};
const UNDERFLOW_SPEC = {
  kind: 'longrun', model: 'mlp', sizes: {in: 8, hidden: 16, classes: 4},
  data: {seed: 7, eval_examples: 128}, steps: 30, batch: 16, n_seeds: 3, seed: 1, log_every: 5,
  optimizer: {name: 'adamw', lr: 0.01, eps: 1e-16}, amp: {dtype: 'fp16'}, loss_weight: 2 ** -20,
};
const POLICY = 'lab-fp16';
const POLICY_REASON = 'browser test: the shipped op lists, stored for the lab';
// Logged steps: 0, log_every, ..., steps (docs/JOBS.md "Loss curve").
const loggedSteps = (sp) => sp.steps / sp.log_every + 1;

let svc = null, browser = null, page = null, passJob = null, ufJob = null, queuedJob = null;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'numval-browser-lr-'));
process.on('exit', () => fs.rmSync(tmp, {recursive: true, force: true}));

async function shot(name) {
  fs.mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function openJob(id) {
  await visit(page, svc.url + `/#/jobs/${id}`);
  await page.locator('#longrun-loss svg.line-chart').waitFor();
}

before(async () => {
  if (SKIP) return;
  svc = await startService({bins: BINS, dir: tmp, root: ROOT});
  // A stored AMP policy (the shipped default's op lists) under its own name; the
  // passing job names its version 1, numvald puts it inline.
  const shipped = JSON.parse(fs.readFileSync(path.join(ROOT, 'suites', 'amp_policy_default.json'), 'utf8'));
  const pol = {low_precision: shipped.low_precision, fp32: shipped.fp32, promote: shipped.promote};
  const p = await api(svc, 'POST', '/amp-policies', {name: POLICY, policy: pol, reason: POLICY_REASON}, svc.adminToken);
  assert.equal(p.status, 201, JSON.stringify(p.body));
  const a = await api(svc, 'POST', '/jobs', {...PASS_SPEC, device: 'emu0',
    amp: {...PASS_SPEC.amp, policy_name: POLICY, policy_version: 1}}, svc.submitToken);
  const b = await api(svc, 'POST', '/jobs', {...UNDERFLOW_SPEC, device: 'emufast'}, svc.submitToken);
  // No worker serves "nowhere": this one stays queued.
  const c = await api(svc, 'POST', '/jobs', {...UNDERFLOW_SPEC, device: 'nowhere'}, svc.submitToken);
  for (const r of [a, b, c]) assert.equal(r.status, 201, JSON.stringify(r.body));
  queuedJob = c.body.job;
  passJob = await waitJob(svc, a.body.job.id, 60000);
  ufJob = await waitJob(svc, b.body.job.id, 60000);
  const {chromium} = await import('playwright-core');
  browser = await chromium.launch({executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true});
  page = await (await browser.newContext({viewport: {width: 1280, height: 860}})).newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
}, {timeout: 90000});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (svc) await stopService(svc);
  fs.rmSync(tmp, {recursive: true, force: true});
});

test('the worker ran both long-run jobs with the verdicts their construction gives', {skip: SKIP}, () => {
  assert.equal(passJob.state, 'passed', JSON.stringify(passJob.result && passJob.result.acceptance));
  assert.equal(ufJob.state, 'failed', JSON.stringify(ufJob.result && ufJob.result.acceptance));
  assert.equal(ufJob.result.acceptance.failure_class, 'gradient_underflow');
});

test('jobs list: seeds × steps for long-run jobs, not "0 / 0" cases', {skip: SKIP}, async () => {
  await visit(page, svc.url + '/#/jobs?kind=longrun');
  const row = (j) => page.locator(`#main table.data tbody tr[data-job="${j.id}"]`);
  const progress = async (j) => (await row(j).locator('td').nth(5).innerText()).trim();
  assert.equal(await progress(passJob), `${PASS_SPEC.n_seeds} seeds × ${PASS_SPEC.steps} steps`);
  assert.equal(await progress(ufJob), `${UNDERFLOW_SPEC.n_seeds} seeds × ${UNDERFLOW_SPEC.steps} steps`);
  // Queued: the same from its spec.
  assert.equal(await progress(queuedJob), `${UNDERFLOW_SPEC.n_seeds} seeds × ${UNDERFLOW_SPEC.steps} steps`);
  assert.deepEqual((await row(passJob).locator('td').allInnerTexts()).slice(6, 8), ['—', '—']);
  assert.match(await row(passJob).locator('td').nth(2).innerText(), /^longrun · mlp · fp16 AMP$/);
  await shot('20-jobs-longrun');
});

test('passing long-run job: verdict, rule, numbers, seeds, determinism, AMP policy', {skip: SKIP}, async () => {
  const job = (await api(svc, 'GET', `/jobs/${passJob.id}`)).body.job;
  const res = job.result, acc = res.acceptance;
  await openJob(passJob.id);
  assert.equal(await page.locator('#longrun-verdict .badge').innerText(), 'passed');
  assert.equal(await page.locator('#longrun-verdict .reason').innerText(), acc.reason);
  assert.equal(await page.locator('#longrun-failure-class').count(), 0);
  const rule = await page.locator('#longrun-rule').innerText();
  assert.match(rule, /Welch test and the trimmed-mean band/);
  assert.match(rule, /reference envelope/);
  const w = acc.final_loss.welch, t = acc.final_loss.trimmed_mean;
  const welch = await page.locator('#longrun-rules tr[data-rule=welch] td').first().innerText();
  assert.ok(welch.startsWith(`t = ${num(w.t)}, df = ${num(w.df)}, p = ${num(w.p)}, alpha = ${num(w.alpha)}`), welch);
  assert.ok(welch.includes(w.rule), 'the Welch rule text as the worker states it');
  const tm = await page.locator('#longrun-rules tr[data-rule=trimmed_mean] td').first().innerText();
  assert.ok(tm.includes(`reference ${num(t.reference)}, device ${num(t.device)}`) && tm.includes(`band ${num(t.band)}`), tm);
  const env = await page.locator('#longrun-rules tr[data-rule=envelope] td').first().innerText();
  assert.ok(env.startsWith(`margin ${num(acc.envelope.margin)}, 0 violation(s)`), env);
  // At matched weights: one line per layer and the eval loss, the worker's numbers.
  const mw = acc.matched_weights;
  const items = page.locator('#longrun-rules tr[data-rule=matched_weights] li');
  assert.equal(await items.count(), mw.gradient.length + 1);
  const L0 = mw.gradient[0];
  assert.ok((await items.first().innerText()).startsWith(
    `gradient ${L0.layer}: ${num(L0.device_error)} vs declared ${num(L0.declared_error)}`));
  assert.equal(await page.locator('#longrun-rules tr[data-rule=matched_weights] td').last().innerText(), 'passed');
  // Drift, paired by seed (reported, not judged): the worker's numbers as shown.
  const d = acc.final_loss.drift;
  const drift = await page.locator('#longrun-rules tr[data-rule=drift] td').first().innerText();
  assert.ok(drift.startsWith(`mean device − reference ${num(d.mean_gap)} (sd ${num(d.sd)}), t = ${num(d.t)}`), drift);
  assert.ok(drift.includes(`of ${d.of} seeds`) && drift.includes(d.rule), drift);
  // The seeds: n_seeds consecutive from "seed" (docs/JOBS.md).
  assert.equal(await page.locator('#longrun-seeds').innerText(), '1, 2, 3');
  assert.deepEqual(acc.seeds, [1, 2, 3]);
  assert.equal(await page.locator('#longrun-bitident').innerText(), acc.determinism.bit_identical ? 'yes' : 'no');
  assert.match(await page.locator('#longrun-rules tr[data-rule=determinism] td').first().innerText(),
    /^seed 1 repeated: bit-identical (yes|no)/);
  // The stored policy version the job named, with its author (the admin token's name) and reason.
  assert.equal(res.amp.policy_version, 1);
  assert.equal(await page.locator('#longrun-amp').innerText(), `fp16, policy "${POLICY}" version 1, master weights fp32`);
  await page.locator('#longrun-amp-audit', {hasText: POLICY_REASON}).waitFor({timeout: 5000});
  assert.match(await page.locator('#longrun-amp-audit').innerText(), new RegExp(`^by browser-admin at .*: ${POLICY_REASON}$`));
  assert.equal(await page.locator('#longrun-finals tbody tr').count(), PASS_SPEC.n_seeds);
});

test('passing long-run job: SVG loss curves per seed over the reference band', {skip: SKIP}, async () => {
  const res = (await api(svc, 'GET', `/jobs/${passJob.id}`)).body.job.result;
  const svg = page.locator('#longrun-loss svg.line-chart');
  assert.equal(await svg.getAttribute('role'), 'img');
  // Text alternative: the <title> names the chart, the <desc> lists the series.
  assert.match(await svg.locator('title').first().textContent(), /^Eval loss per logged step/);
  assert.match(await svg.locator('desc').textContent(), new RegExp(`^${1 + PASS_SPEC.n_seeds} series`));
  const groups = svg.locator('g.series');
  assert.equal(await groups.count(), 1 + PASS_SPEC.n_seeds);
  const n = loggedSteps(PASS_SPEC);
  // The reference: its mean line, the min..max band and the dotted envelope.
  const ref = groups.nth(0);
  assert.match(await ref.getAttribute('data-name'), new RegExp(`over ${PASS_SPEC.n_seeds} seeds`));
  assert.equal(await ref.locator('path.band').count(), 1);
  assert.equal(await ref.locator('path.envelope').count(), 1);
  for (let i = 0; i <= PASS_SPEC.n_seeds; i++) {
    const g = groups.nth(i);
    assert.equal(Number(await g.getAttribute('data-points')), n);
    // One move and n - 1 line segments: every logged step drawn (all losses finite here).
    const d = await g.locator('path.line').getAttribute('d');
    assert.equal((d.match(/M/g) || []).length, 1, d);
    assert.equal((d.match(/L/g) || []).length, n - 1, d);
    if (i > 0) {
      assert.equal(await g.getAttribute('data-name'), `device seed ${res.curves.device[i - 1].seed}`);
      assert.equal(await g.locator('path.line').getAttribute('stroke-dasharray'), '6 3');
    }
  }
  assert.equal(await page.locator('#longrun-loss ul.legend li').count(), 1 + PASS_SPEC.n_seeds);
  // The data table behind the chart: one row per logged step.
  assert.equal(await page.locator('#longrun-loss details table tbody tr').count(), n);
  // Skipped steps marked on the loss-scale chart, as in the per-step record (zstd CLI).
  const jsonl = execFileSync('zstd', ['-d', '-q', '-c'], {input: Buffer.from(res.series.data, 'base64')})
    .toString().trim().split('\n').map((l) => JSON.parse(l));
  const skipped = jsonl.filter((r) => r.run === 'device' && r.skipped).length;
  assert.equal(await page.locator('#longrun-scale svg path.mark').count(), skipped);
  assert.equal(await page.locator('#longrun-scale svg g.series').count(), PASS_SPEC.n_seeds);
  // Per-layer gradient norms at the last logged step, device seed 1, as recorded.
  const last = jsonl.filter((r) => r.run === 'device' && r.seed === 1).pop();
  const layers = Object.keys(last.layer_grad_norms);
  assert.equal(await page.locator('#longrun-layers tbody tr').count(), layers.length);
  const cells = await page.locator('#longrun-layers tbody tr').first().locator('td').allInnerTexts();
  assert.equal(cells[1], num(last.layer_grad_norms[layers[0]]));
  await shot('21-longrun-passed');
});

test('failing long-run job: gradient_underflow with its reason and numbers', {skip: SKIP}, async () => {
  const acc = (await api(svc, 'GET', `/jobs/${ufJob.id}`)).body.job.result.acceptance;
  await openJob(ufJob.id);
  assert.match(await page.locator('h1').innerText(), /failed/);
  assert.equal(await page.locator('#longrun-verdict .badge').innerText(), 'failed');
  assert.equal(await page.locator('#longrun-failure-class').innerText(), 'gradient_underflow');
  assert.equal(await page.locator('#longrun-verdict .reason').innerText(), acc.reason);
  assert.match(acc.reason, /exactly zero/);
  assert.equal(await page.locator('#longrun-lowp-zero').innerText(), `${num(100 * acc.lowp_gradient_zero_fraction)} %`);
  assert.ok(acc.lowp_gradient_zero_fraction > 0.25, 'more than the 25% the rule allows');
  // No policy named: the worker's shipped default, version 0.
  assert.equal(await page.locator('#longrun-amp').innerText(),
    'fp16, policy "default" version 0 (the worker\'s shipped default), master weights fp32');
  assert.equal(await page.locator('#longrun-amp-audit').count(), 0);
  assert.equal(await page.locator('#longrun-loss svg g.series').count(), 1 + UNDERFLOW_SPEC.n_seeds);
  assert.equal(Number(await page.locator('#longrun-loss svg g.series').nth(1).getAttribute('data-points')),
    loggedSteps(UNDERFLOW_SPEC));
  await shot('22-longrun-underflow');
});

test('phone width: the long-run page does not scroll sideways, the chart fits', {skip: SKIP}, async () => {
  await page.setViewportSize({width: 390, height: 844});
  await openJob(passJob.id);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - innerWidth);
  assert.ok(overflow <= 1, `page scrolls sideways by ${overflow}px`);
  const box = await page.locator('#longrun-loss svg.line-chart').boundingBox();
  assert.ok(box.width <= 390, `chart ${box.width}px wide`);
  await shot('23-longrun-phone');
  await page.setViewportSize({width: 1280, height: 860});
});
