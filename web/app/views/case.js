// Case detail: verdict, metrics, tolerance with its reason and version history,
// first mismatching elements with their bit patterns, the reproduction gate,
// artifact downloads, the repro command, the link to this test's history across
// builds; fused and long-run sections appear when the case carries their data.

import {h, num, badge, kv, section, empty, errorBox, exact, copyable, qs, when} from '../util.js';
import {getJson, optional, apiUrl, getToken} from '../api.js';
import {tolMetric, tolReason, listOf, fieldTitle} from './common.js';
import {fusedSection} from './fused.js';
import {modelSection, suiteCaseOf} from './model.js';
import {servingSection} from './serving.js';
import {rngSection} from './rng.js';
import {bitsHex, bitFields} from '../bits.js';
import {histogram, elementBins, trimBins} from '../charts.js';
import {href} from '../router.js';

// Shown in their own rows and sections; every other field appears under its label.
const SHOWN = new Set(['id', 'job_id', 'index', 'verdict', 'op', 'dtype', 'out_dtype', 'shape', 'layout',
  'input', 'seed', 'max_ulp', 'mean_ulp', 'p99_ulp', 'max_abs', 'max_rel', 'mismatches', 'nan_mismatches',
  'inf_mismatches', 'compared', 'failure_class', 'headroom', 'deterministic', 'tolerance', 'first_mismatches',
  'error', 'artifact', 'minimized_artifact', 'minimized_elements', 'repro_rate', 'flaky', 'signature',
  'ulp_histogram', 'tolerance_version', 'build_id', 'device', 'nodes', 'graph', 'curves',
  'first_divergent', 'first_divergent_node', 'series']);

// A value's bit pattern in dtype, its fields in the tooltip.
function bitsCode(v, dtype) {
  const hex = bitsHex(v, dtype);
  return hex === null ? '—' : h('code.bits', {title: `${dtype}: ${bitFields(v, dtype)}`}, hex);
}

function mismatchTable(list, c) {
  if (!Array.isArray(list) || !list.length) return empty('No mismatching elements recorded.');
  const inDt = c.dtype || '?', outDt = c.out_dtype || c.dtype || '?';
  const joined = (vals, f) => (Array.isArray(vals) && vals.length
    ? vals.flatMap((v, i) => (i ? [', ', f(v)] : [f(v)])) : '—');
  return h('div.table-wrap', h('table.data', {id: 'mismatches'},
    h('caption', `First ${list.length} mismatching element${list.length > 1 ? 's' : ''}; bit patterns in hex ` +
      `(inputs in ${inDt}, device and correctly rounded values in ${outDt}, rounded to nearest even from the exact value)`),
    h('thead', h('tr', ['Index', 'Inputs', `Input bits (${inDt})`, 'Device', `Device bits (${outDt})`, 'Exact',
      `Correctly rounded bits (${outDt})`, 'ULP error', 'Abs error', 'Allowed', 'Kind']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((m) => h('tr',
      h('td', h('code', Array.isArray(m.index) ? `[${m.index.join(', ')}]` : exact(m.index))),
      h('td', h('code', Array.isArray(m.inputs) ? m.inputs.map(exact).join(', ') : exact(m.inputs))),
      h('td.in-bits', joined(m.inputs, (v) => bitsCode(v, inDt))),
      h('td', h('code.got', exact(m.got))),
      h('td.got-bits', bitsCode(m.got, outDt)),
      h('td', h('code.exact', exact(m.exact))),
      h('td.cr-bits', bitsCode(m.exact, outDt)),
      h('td.num', num(m.ulp_error)),
      h('td.num', num(m.abs_error)),
      h('td.num', num(m.allowed)),
      h('td', m.kind || '—'))))));
}

// The reproduction gate and minimizer of the worker (docs/ARTIFACTS.md "Reproduction gate and minimization").
function reproRows(c) {
  const rr = c.repro_rate && typeof c.repro_rate === 'object' ? c.repro_rate : null;
  const me = c.minimized_elements && typeof c.minimized_elements === 'object' ? c.minimized_elements : null;
  const sig = c.signature && typeof c.signature === 'object' ? c.signature : null;
  return [
    [fieldTitle('repro_rate'), rr ? h('span', {id: 'repro-rate'}, `${num(rr.failed)} of ${num(rr.runs)} runs failed` +
      (rr.bit_identical != null ? `, ${num(rr.bit_identical)} bit-identical` : '')) : undefined],
    [fieldTitle('flaky'), c.flaky === undefined ? undefined : (c.flaky ? h('strong.bad', 'yes') : 'no')],
    [fieldTitle('minimized_elements'), me ? `${num(me.total)} element${me.total === 1 ? '' : 's'}` +
      (me.non_neutral != null ? ` (${num(me.non_neutral)} not neutral)` : '') : undefined],
    [fieldTitle('signature'), sig ? h('details', h('summary', h('code', {title: sig.id || ''}, String(sig.id || '?').slice(0, 16) + '…')),
      h('pre.json', JSON.stringify(sig, null, 2))) : (typeof c.signature === 'string' ? h('code', c.signature) : undefined)],
  ];
}

// This test (op, dtype, kind, shape, layout, input class, device) across builds,
// keyed as GET /api/v1/history keys it: a gradient case by its job's kind, a fused
// case by its graph's name (the job's "name") as op. job: the case's job, or null.
export function historyHref(c, job) {
  const kind = (job && job.kind) || c.kind || (c.checks !== undefined ? 'gradient' : c.op === 'fused' ? 'fused' : 'op');
  const op = kind === 'fused' ? (job && job.spec && job.spec.name) || c.graph || c.op : c.op;
  return href('/history', {op, dtype: c.dtype, kind: kind !== 'op' ? kind : '',
    shape: Array.isArray(c.shape) ? JSON.stringify(c.shape) : '', layout: c.layout, input: c.input,
    device: c.device});
}

function historyTable(rows, usedVersion) {
  if (!rows.length) return empty('No stored versions: this case was judged by a shipped default or a job override.');
  return h('div.table-wrap', h('table.data', {id: 'tol-history'},
    h('thead', h('tr', ['Version', 'Tolerance', 'Reason', 'Pattern', 'By', 'When']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', rows.map((r) => {
      const t = r.tolerance || r;
      const v = r.version ?? t.version;
      const used = usedVersion != null && Number(v) === Number(usedVersion);
      return h('tr', {class: used ? 'current' : null},
        h('td', `v${v}`, used ? h('span.tag', ' used by this case') : null),
        h('td', tolMetric(t)), h('td', tolReason(t)),
        h('td', h('code', r.mode || r.pattern || '*')),
        h('td', r.author || r.created_by || '—'), h('td', when(r.created_at)));
    }))));
}

// A download link of a stored artifact (GET /api/v1/artifacts/SHA).
function artifactLink(c, sha, {id, text, what}) {
  if (!sha) return null;
  const url = apiUrl(`/artifacts/${encodeURIComponent(sha)}`);
  const name = `numval-case-${c.id}-${what}-${String(sha).slice(0, 12)}.zst`;
  const status = h('span.action-status', {'aria-live': 'polite'});
  const a = h('a.button', {href: url, download: name, id}, text);
  // With a token stored, fetch with it (a plain link cannot send the header).
  a.addEventListener('click', async (ev) => {
    if (!getToken()) return;
    ev.preventDefault();
    try {
      const r = await fetch(url, {headers: {Authorization: `Bearer ${getToken()}`}});
      if (!r.ok) throw new Error(`${r.status} ${r.statusText}`);
      const blob = await r.blob();
      const tmp = h('a', {href: URL.createObjectURL(blob), download: name});
      document.body.append(tmp);
      tmp.click();
      tmp.remove();
      setTimeout(() => URL.revokeObjectURL(tmp.href), 10000);
    } catch (e) {
      status.textContent = `Download refused: ${e.message}`;
    }
  });
  return h('p', a, ' ', h('code.sha', sha), ' ', status);
}

function artifacts(c) {
  if (!c.artifact && !c.minimized_artifact) return empty('No artifact stored for this case.');
  return [
    artifactLink(c, c.artifact, {id: 'artifact-link', text: 'Download artifact', what: 'artifact'}),
    artifactLink(c, c.minimized_artifact, {id: 'minimized-artifact-link', text: 'Download minimized artifact',
      what: 'minimized'}),
  ];
}

export async function renderCase(ctx) {
  const {main, params} = ctx;
  const id = params.id;
  document.title = `Case ${id} · numval`;
  const c = (await getJson(`/cases/${encodeURIComponent(id)}`)).case;
  // Gradient and fused cases name their test through their job (its kind, the graph's name).
  const job = c.op === 'fused' || c.checks !== undefined
    ? ((await optional(`/jobs/${encodeURIComponent(c.job_id)}`).catch(() => null)) || {}).job || null : null;
  const t = c.tolerance || null;
  const usedVersion = c.tolerance_version ?? (t ? t.version : null);
  const title = `Case ${id}: ${c.op || ''} ${c.dtype || ''}`.trim();

  const more = Object.entries(c).filter(([k, v]) => !SHOWN.has(k) && (typeof v !== 'object' || v === null));
  const extra = Object.entries(c).filter(([k, v]) => !SHOWN.has(k) && v && typeof v === 'object');
  const repro = reproRows(c).filter(([, v]) => v !== undefined);
  const bins = elementBins(c.ulp_histogram);
  const elem = bins && trimBins(bins);
  const elemTotal = elem ? elem.counts.reduce((a, b) => a + b, 0) : 0;

  // DOM append writes null as the text "null": only sections that exist go in.
  main.append(...[
    h('p.crumbs', h('a', {href: '#/jobs'}, 'Jobs'), ' › ',
      h('a', {href: `#/jobs/${encodeURIComponent(c.job_id)}`}, `#${c.job_id}`), ' › ', `case ${c.index ?? id}`),
    h('h1', title, ' ', badge(c.verdict)),
    c.op && c.dtype ? h('p', {id: 'history'}, c.build_id != null
      ? [h('a', {id: 'history-link', href: historyHref(c, job)}, 'History across builds'),
        h('span.muted', ' (this test\'s error and verdict on every build)')]
      : h('span.muted', 'No history across builds: this case\'s job was submitted without a build.')) : null,
    section('Verdict', kv([
      ['Verdict', badge(c.verdict)],
      ['Failure class', c.failure_class ? h('strong.bad', c.failure_class) : undefined],
      ['Error', c.error ? h('span.bad', c.error) : undefined],
      ['Job', h('a', {href: `#/jobs/${encodeURIComponent(c.job_id)}`}, `#${c.job_id}`)],
      ['Case index', num(c.index)],
      ['Device', c.device ? h('a', {href: `#/devices?name=${encodeURIComponent(c.device)}`}, String(c.device)) : undefined],
      ['Build', c.build_id != null ? String(c.build_id) : undefined],
      ['Op · dtype', `${c.op || '—'} · ${c.dtype || '—'}`],
      [fieldTitle('out_dtype'), c.out_dtype],
      ['Shape', c.shape ? `[${c.shape.join(' × ')}]` : undefined],
      ['Layout', c.layout], ['Input class', c.input], ['Seed', c.seed != null ? String(c.seed) : undefined],
      ['Deterministic', c.deterministic === undefined ? undefined : String(c.deterministic)],
      ...more.map(([k, v]) => [fieldTitle(k), String(v)]),
    ]), h('div.metrics', {id: 'case-metrics'}, kv([
      ['Max ULP error', num(c.max_ulp)], ['Mean ULP error', num(c.mean_ulp)], ['p99 ULP error', num(c.p99_ulp)],
      ['Max abs error', num(c.max_abs)], ['Max rel error', num(c.max_rel)],
      [fieldTitle('compared'), c.compared === undefined ? undefined : num(c.compared)],
      ['Mismatches', num(c.mismatches)],
      [fieldTitle('nan_mismatches'), c.nan_mismatches === undefined ? undefined : num(c.nan_mismatches)],
      [fieldTitle('inf_mismatches'), c.inf_mismatches === undefined ? undefined : num(c.inf_mismatches)],
      ['Headroom', num(c.headroom)],
    ]))),
    fusedSection(c),
    modelSection(c, {suiteCase: await suiteCaseOf(c)}),
    servingSection(c),
    rngSection([c], {title: 'RNG check'}),
    section('Tolerance', t ? h('div', {id: 'tolerance'}, kv([
      ['Allowed', tolMetric(t)],
      ['Reason', tolReason(t)],
      ['Version', usedVersion ? `v${usedVersion}` : 'none (shipped default or job override)'],
      ['Source', t.source],
    ])) : empty('This case records no tolerance.'),
    h('h3', 'Version history'), h('div', {id: 'tol-history-box'}, h('p.muted', 'Loading…'))),
    section('First mismatching elements', mismatchTable(c.first_mismatches, c)),
    elem ? section('Element-wise ULP error', h('div', {id: 'element-histogram'}, histogram({...elem,
      title: `ULP error of every element, ${num(elemTotal)} elements`, xLabel: 'ULP error per element'}))) : null,
    section('Reproduce', repro.length ? h('div', {id: 'repro-gate'}, kv(repro)) : null,
      h('div', {id: 'artifact'}, artifacts(c)),
      h('p', 'Re-run this case at your desk (downloads the artifact and runs it through ',
        h('code', 'numval-worker run'), ' with the same backend):'),
      copyable(`numvalctl --server ${location.origin} repro ${id}`)),
    extra.length ? section('More data', ...extra.map(([k, v]) =>
      h('details', h('summary', fieldTitle(k)), h('pre.json', JSON.stringify(v, null, 2))))) : null,
  ].filter(Boolean));

  const histBox = main.querySelector('#tol-history-box');
  if (c.op && c.dtype) {
    try {
      const hist = await optional('/tolerances/history' + qs({op: c.op, dtype: c.dtype}));
      histBox.replaceChildren(hist === null ? empty('Tolerance history is not available from this server.')
        : historyTable(listOf(hist, 'tolerances').concat(listOf(hist, 'history')), usedVersion));
    } catch (e) {
      histBox.replaceChildren(errorBox(e));
    }
  } else {
    histBox.replaceChildren(empty('No op/dtype on this case.'));
  }
}
