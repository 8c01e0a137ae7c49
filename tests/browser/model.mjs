// Browser test of the model job view: a real numvald with its supervised emu
// workers runs the shipped decoder-only LM (suites/model.json "decoder-lm",
// fp32, one sample) on emu (passes) and on emu:storage=fp8_e5m2 (fails at layer
// embed, op embedding; the agent gates and minimizes the op case and numvald
// promotes it), and Debian's chromium shows both job pages and the case page.
//
//   cd tests/browser && node --test model.mjs      (or: meson test --suite browser)
//
// Expected shapes come from the job and the API: one chart point and one table
// row per layer, the layer figures as num() writes the API's values, the
// reproducer links naming the case's artifacts, the suite case its signature
// promoted. Exits 77 (skipped) without chromium, playwright-core or the binaries.

import {test, before, after} from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import {fileURLToPath} from 'node:url';
import {startService, stopService, api, waitJob, prerequisites, visit, shown} from './service.mjs';
import {num} from '../../web/app/util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SHOTS = path.join(HERE, 'screenshots');
const {root: ROOT, chromium: CHROMIUM, bins: BINS, skip: SKIP} = prerequisites(HERE);

let svc = null, browser = null, page = null, okJob = null, badJob = null;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'numval-browser-model-'));
process.on('exit', () => fs.rmSync(tmp, {recursive: true, force: true}));

function lm() {
  const suite = JSON.parse(fs.readFileSync(path.join(ROOT, 'suites', 'model.json'), 'utf8'));
  const j = suite.jobs.find((x) => x.name === 'decoder-lm');
  delete j.description;
  return {...j, dtypes: ['fp32'], samples: 1};
}

async function shot(name) {
  fs.mkdirSync(SHOTS, {recursive: true});
  await page.screenshot({path: path.join(SHOTS, `${name}.png`), fullPage: true});
}

async function openJob(id) {
  await visit(page, svc.url + `/#/jobs/${id}`);
  await page.locator('#model-layers-chart svg.line-chart').waitFor();
}

before(async () => {
  if (SKIP) return;
  // Every op output held in fp8 e5m2: the model job fails, localized to an op.
  svc = await startService({bins: BINS, dir: tmp, root: ROOT, devices: {emufp8: 'emu:storage=fp8_e5m2'}});
  const a = await api(svc, 'POST', '/jobs', {...lm(), device: 'emu0'}, svc.submitToken);
  const b = await api(svc, 'POST', '/jobs', {...lm(), device: 'emufp8'}, svc.submitToken);
  for (const r of [a, b]) assert.equal(r.status, 201, JSON.stringify(r.body));
  okJob = await waitJob(svc, a.body.job.id, 90000);
  badJob = await waitJob(svc, b.body.job.id, 90000);
  const {chromium} = await import('playwright-core');
  browser = await chromium.launch({executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true});
  page = await (await browser.newContext({viewport: {width: 1280, height: 860}})).newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
}, {timeout: 150000});

after(async () => {
  if (browser) await browser.close().catch(() => {});
  if (svc) await stopService(svc);
  fs.rmSync(tmp, {recursive: true, force: true});
});

const casesOf = async (j) => (await api(svc, 'GET', `/jobs/${j.id}/cases?limit=10`)).body.cases;

test('the LM passes on emu and fails with fp8 e5m2 storage', {skip: SKIP}, () => {
  assert.equal(okJob.state, 'passed');
  assert.equal(badJob.state, 'failed');
});

test('failing model job: chart, layers, first divergent op and its reproducer', {skip: SKIP}, async () => {
  const [c] = await casesOf(badJob);
  const fd = c.first_divergent;
  assert.equal(fd.layer, 'embed');
  await openJob(badJob.id);
  assert.equal(await page.locator('#main dl.kv dd').nth(1).innerText(), 'model · decoder-lm');
  assert.equal(await page.locator('#model-fd-layer').innerText(), fd.layer);
  assert.equal(await page.locator('#model-fd-op').innerText(), fd.op);
  assert.equal(await page.locator('#model-fd-node').innerText(), fd.node);
  assert.match(await page.locator('#model-fd-local').innerText(), /^outside tolerance/);
  // The chart: device, model-dtype reference and band series, one point per layer.
  const series = page.locator('#model-layers-chart svg g.series');
  assert.equal(await series.count(), 3);
  for (let i = 0; i < 3; i++) {
    assert.equal(Number(await series.nth(i).getAttribute('data-points')), c.layers.length);
  }
  // The table: one row per layer, the API's numbers, the divergent layer marked.
  const rows = page.locator('#model-layers tbody tr');
  assert.equal(await rows.count(), c.layers.length);
  for (let i = 0; i < c.layers.length; i++) {
    const cells = await rows.nth(i).locator('td').allInnerTexts();
    assert.deepEqual(cells.slice(0, 4), [c.layers[i].output, num(c.layers[i].e_dev),
      num(c.layers[i].e_dtype_ref), num(c.layers[i].band)]);
  }
  assert.equal(await page.locator('#model-layers tr.divergent th').innerText(), 'embed first divergent');
  // The reproducer: the op case's artifacts, the gate, the promoted suite case.
  assert.equal(await page.locator('#model-localized').getAttribute('data-state'), 'op_case');
  assert.ok((await page.locator('#model-artifact-link').getAttribute('href')).endsWith(`/artifacts/${c.artifact}`));
  assert.ok((await page.locator('#model-minimized-link').getAttribute('href'))
    .endsWith(`/artifacts/${c.minimized_artifact}`));
  const suite = (await api(svc, 'GET', '/suite')).body.suite;
  const sc = suite.find((x) => x.signature === c.signature.id);
  assert.ok(sc, 'the signature was promoted');
  assert.equal(await page.locator('#model-suite-link').innerText(), `#${sc.id}: op embedding fp32`);
  // Logits and tokens as the worker reported them.
  const d = c.criteria.decode;
  assert.equal(await page.locator('#model-decode-agreement').innerText(), num(d.agreement));
  assert.equal(await page.locator('#model-decode-first').innerText(),
    d.first_divergent === null ? 'none' : String(d.first_divergent));
  assert.equal(await page.locator('#model-tokens tbody tr').count(), 2);
  assert.equal(await page.locator('#model-tokens tbody tr').first().locator('td').count(), d.steps);
  assert.match(await page.locator('#model-logits').innerText(), new RegExp(`mean KL ${num(c.criteria.logits.kl_mean)}`));
  await shot('30-model-failed');
  // The case link: the case page shows the same view.
  await shown(page, `/cases/${c.id}`, () => page.locator('#model-case-link').click());
  assert.equal(await page.locator('#model-fd-op').innerText(), fd.op);
  assert.equal(await page.locator('#model-layers tbody tr').count(), c.layers.length);
});

test('passing model job: no divergent layer, no reproducer', {skip: SKIP}, async () => {
  const [c] = await casesOf(okJob);
  await openJob(okJob.id);
  assert.equal(await page.locator('#model-first-divergent').innerText(), 'No layer left its band.');
  assert.equal(await page.locator('#model-artifact-link').count(), 0);
  assert.equal(await page.locator('#model-layers tbody tr').count(), c.layers.length);
  assert.equal(await page.locator('#model-layers tr[data-in-band=false]').count(), 0);
  await shot('31-model-passed');
});
