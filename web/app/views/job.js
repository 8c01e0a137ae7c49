// Job detail: summary, cancel, cases table, ULP histogram; polls while the job runs.

import {h, num, badge, when, duration, kv, section, empty, errorBox, shortId} from '../util.js';
import {getJson, optional, post, poll} from '../api.js';
import {writeAction} from '../auth.js';
import {histogram, ulpBins, elementBins, trimBins} from '../charts.js';
import {jobProgress, jobWhat, buildsOf} from './common.js';
import {casesTable, scanUlps} from './cases-table.js';
import {longrunSection} from './longrun.js';
import {modelSection, suiteCaseOf} from './model.js';
import {servingSection} from './serving.js';
import {rngSection} from './rng.js';

const ACTIVE = ['queued', 'leased', 'running'];
const HIST_MAX = 5000;

// The element-wise histograms of the cases summed, when every case has one with the
// same bins; else null.
export function sumBins(hists) {
  if (!hists.length || hists.some((x) => !x)) return null;
  const labels = hists[0].labels;
  if (hists.some((x) => x.labels.length !== labels.length || x.labels.some((l, i) => l !== labels[i]))) return null;
  return {labels: [...labels], counts: labels.map((_, i) => hists.reduce((a, x) => a + x.counts[i], 0))};
}

const devLink = (d) => h('a', {href: `#/devices?name=${encodeURIComponent(d)}`}, d);

// The device asked for, else the one that claimed the job ("leased_by").
function deviceCell(j) {
  if (j.device) return devLink(j.device);
  if (j.leased_by) return h('span', {id: 'ran-on'}, 'any; ran on ', devLink(j.leased_by));
  return 'any';
}

function summary(j, buildName) {
  return kv([
    ['State', badge(j.state)],
    ['What', jobWhat(j)],
    ['Device', deviceCell(j)],
    ['Build', j.build_id != null ? h('a', {href: `#/jobs?build=${encodeURIComponent(j.build_id)}`,
      title: String(j.build_id)}, buildName || shortId(j.build_id, 16)) : '—'],
    ['Progress', jobProgress(j)],
    ['Passed / failed', j.kind === 'longrun' ? undefined : h('span', num(j.cases_passed), ' / ',
      j.cases_failed ? h('strong.bad', num(j.cases_failed)) : num(j.cases_failed))],
    ['Priority', num(j.priority)],
    ['Attempt', j.attempt != null ? `${j.attempt} of ${j.max_attempts ?? '?'}` : '—'],
    ['Created', when(j.created_at)],
    ['Started', when(j.started_at)],
    ['Finished', when(j.finished_at)],
    ['Took', duration(j.started_at, j.finished_at)],
    ['Error', j.error ? h('span.bad', j.error) : undefined],
  ]);
}

export async function renderJob(ctx) {
  const {main, params, query} = ctx;
  const id = params.id;
  const base = `/jobs/${id}`;
  document.title = `Job #${id} · numval`;
  let job = (await getJson(`/jobs/${encodeURIComponent(id)}`, {track: true})).job;
  let buildName = null;
  if (job.build_id != null) {
    const b = buildsOf(await optional('/builds').catch(() => null)).find((x) => String(x.id) === String(job.build_id));
    if (b) buildName = [b.name, b.version, b.commit && `@${String(b.commit).slice(0, 8)}`].filter(Boolean).join(' ');
  }

  const sumBox = h('div', summary(job, buildName));
  const actStatus = h('p.action-status', {'aria-live': 'polite'});
  const cancelBtn = h('button.danger', {type: 'button', id: 'cancel-job', onclick: async () => {
    const r = await writeAction(`Cancel job #${id}`, () =>
      post(`/jobs/${encodeURIComponent(id)}/cancel`), actStatus);
    if (r && r.job) { job = r.job; redraw(); }
  }}, 'Cancel job');
  const actions = h('div.actions', cancelBtn, actStatus);
  const specBox = h('details', h('summary', 'Job spec (JSON)'),
    h('pre.json', JSON.stringify(job.spec ?? {}, null, 2)));
  const res = job.result && typeof job.result === 'object' ? job.result : null;
  const asRun = res && (res.mode || res.device || res.contract || res.build)
    ? h('details', h('summary', 'Device, numerical mode and build as run'),
      ['device', 'mode', 'contract', 'build', 'backend'].filter((k) => res[k] !== undefined).map((k) =>
        h('div', h('h3', k), h('pre.json', typeof res[k] === 'string' ? res[k] : JSON.stringify(res[k], null, 2)))))
    : null;

  const table = casesTable(job, query, base);
  const histBox = h('div', h('p.muted', 'Computing the histogram…'));

  const h1 = h('h1', `Job #${id} `, badge(job.state));
  const lrBox = h('div');
  function redraw() {
    if (!lrBox.firstChild && job.result) {
      const lr = longrunSection(job.result, job.spec);
      if (lr) lrBox.append(lr);
    }
    sumBox.replaceChildren(summary(job, buildName));
    h1.replaceChildren(`Job #${id} `, badge(job.state));
    cancelBtn.hidden = !ACTIVE.includes(job.state);
    actions.hidden = cancelBtn.hidden && !actStatus.textContent;
  }
  redraw();

  main.append(
    h('p.crumbs', h('a', {href: '#/jobs'}, 'Jobs'), ' › ', `#${id}`),
    h1,
    section('Summary', sumBox, actions, specBox, asRun),
    lrBox);
  // A model or serving job: its first failed case (else its first) as the model
  // or serving view. An RNG job: every case, one per check (at most 19 by the
  // spec's limits), as the RNG view.
  const modelBox = h('div');
  main.append(modelBox);
  async function model() {
    if (!['model', 'serving', 'rng'].includes(job.kind) || ACTIVE.includes(job.state) || modelBox.firstChild) return;
    const all = (await getJson(`/jobs/${encodeURIComponent(id)}/cases?limit=200`)).cases || [];
    if (job.kind === 'rng') {
      const sec = ctx.alive() ? rngSection(all) : null;
      if (sec) modelBox.append(sec);
      return;
    }
    const c = all.find((x) => x.verdict === 'failed') || all[0];
    if (c && ctx.alive()) {
      const caseHref = `#/cases/${encodeURIComponent(c.id)}`;
      const sec = job.kind === 'serving' ? servingSection(c, {caseHref})
        : modelSection(c, {suiteCase: await suiteCaseOf(c), caseHref});
      if (sec) modelBox.append(sec);
    }
  }
  await model().catch((e) => modelBox.replaceChildren(errorBox(e)));
  // A long-run job has no cases: its result is the training record above. A
  // serving or RNG case has no ULP metrics (its check's figures are its view).
  const cases = job.kind !== 'longrun';
  const ulps = cases && !['serving', 'rng'].includes(job.kind);
  let histHead = null;
  if (cases) {
    const histSec = ulps ? section('Per-case maximum ULP error', histBox) : null;
    histHead = histSec && histSec.querySelector('h2');
    main.append(...[section('Cases', table.el), histSec].filter(Boolean));
    await table.load();
  }

  // What the histogram counts, said in its caption: per-case maxima (one value per
  // case: its largest element error), unless every case carries its element-wise
  // histogram ("ulp_histogram"), whose bins are then summed over the cases.
  async function hist() {
    try {
      const {values, hists, complete} = await scanUlps(id, query.verdict || '', HIST_MAX, () => {}, ctx.alive);
      if (!ctx.alive()) return;
      const what = query.verdict ? `${query.verdict} cases` : 'cases';
      const of = complete ? `${num(values.length)} ${what}` : `first ${num(values.length)} of ${num(job.cases_total)} ${what}`;
      const sum = sumBins(hists);
      const elem = sum && trimBins(sum);
      if (elem) {
        const n = elem.counts.reduce((a, b) => a + b, 0);
        histHead.textContent = 'Element-wise ULP error';
        histBox.replaceChildren(histogram({...elem, xLabel: 'ULP error per element',
          title: `ULP error of every element, ${num(n)} elements in ${of}`}));
        return;
      }
      const finite = values.filter((v) => v !== undefined && v !== null);
      if (!finite.length) {
        histBox.replaceChildren(empty('No ULP metrics in these cases (yet).'));
        return;
      }
      histBox.replaceChildren(histogram({...ulpBins(finite), xLabel: 'maximum ULP error of a case',
        title: `Per-case maximum ULP error, ${of} (each case counts once, by its largest element error)`}));
    } catch (e) {
      histBox.replaceChildren(errorBox(e));
    }
  }
  if (ulps) hist();

  if (ACTIVE.includes(job.state)) {
    const stop = poll(`/jobs/${encodeURIComponent(id)}`, 1500, async (data) => {
      job = data.job;
      redraw();
      if (!ACTIVE.includes(job.state)) {
        stop();
        model().catch((e) => modelBox.replaceChildren(errorBox(e)));
        if (!cases) return;
        await table.load();
        if (ulps) hist();
      }
    });
    ctx.onLeave(stop);
  }
}
