// One test across builds: its error and verdict on every build that ran it, oldest
// to newest (GET /api/v1/history?op=&dtype=[&kind=][&shape=JSON][&layout=][&input=]
// [&device=][&limit=N] -> {"key": {...}, "points": [{"build_id", "identity",
// "verdict", "max_ulp", "headroom", "cases", "failed", "case_id", "job_id",
// "tolerance"}]}). The chart's dots link to each build's case; failed builds are
// drawn as a ring with a cross, and the table below lists every point.

import {h, num, section, empty, shortId, qs, badge} from '../util.js';
import {getJson, ApiError} from '../api.js';
import {href} from '../router.js';
import {svgLineChart} from '../svgchart.js';
import {tolMetric} from './common.js';

const KEYS = ['op', 'dtype', 'kind', 'shape', 'layout', 'input', 'device'];
const LABELS = {op: 'Op', dtype: 'Dtype', kind: 'Kind', shape: 'Shape (JSON)', layout: 'Layout',
  input: 'Input class', device: 'Device', limit: 'Builds (at most)'};

// The text of a build: name, version, short commit (identity as numvald stores it).
export function pointBuild(p) {
  const id = p.identity && typeof p.identity === 'object' ? p.identity : {};
  const parts = [id.name, id.version, id.commit && `@${String(id.commit).slice(0, 8)}`].filter(Boolean);
  return parts.length ? parts.join(' ') : shortId(p.build_id, 12);
}

// The short x-axis text of a build: its version, else its name, else its hash.
function tickName(p) {
  const id = p.identity && typeof p.identity === 'object' ? p.identity : {};
  return String(id.version || id.name || shortId(p.build_id, 8));
}

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

// Which error the chart draws: max ULP when any point has it (op and fused cases),
// else headroom (gradient cases: worst error over its allowance, <= 1 passes).
export function historyMetric(points) {
  if (points.some((p) => isNum(p.max_ulp))) return {key: 'max_ulp', label: 'max ULP error'};
  return {key: 'headroom', label: 'headroom (error / allowed)'};
}

// The chart's series: the error per build (x = position, oldest first) with a link
// per point, and the limit the tolerance allowed when the points carry one.
export function historySeries(points) {
  const m = historyMetric(points);
  const val = (p) => (isNum(p[m.key]) ? p[m.key] : NaN);
  const failed = (p) => p.verdict === 'failed';
  const err = {
    name: m.label,
    points: points.map((p, i) => [i, val(p)]),
    links: points.map((p, i) => ({x: i, y: val(p), failed: failed(p),
      href: p.case_id != null ? `#/cases/${encodeURIComponent(p.case_id)}` : null,
      label: `${pointBuild(p)}: ${p.verdict || 'unknown'}, ${m.label} ${num(p[m.key])}` +
        (p.case_id != null ? ` (case ${p.case_id})` : '')})).filter((l) => Number.isFinite(l.y)),
  };
  const series = [err];
  const allowed = points.map((p, i) => {
    if (m.key === 'headroom') return [i, 1];
    const t = p.tolerance;
    return [i, t && t.metric === 'ulp' && isNum(t.max_ulp) ? t.max_ulp : NaN];
  });
  if (allowed.some(([, y]) => Number.isFinite(y))) {
    series.push({name: m.key === 'headroom' ? 'allowed (1)' : 'allowed by the tolerance (ULP)', points: allowed, dash: true});
  }
  return {metric: m, series, xTicks: points.map((p, i) => [i, tickName(p)])};
}

// A logarithmic axis when every value is positive and they span more than 100x.
function wantLog(series) {
  const ys = series.flatMap((sr) => sr.points.map(([, y]) => y)).filter(Number.isFinite);
  return ys.length > 1 && ys.every((y) => y > 0) && Math.max(...ys) / Math.min(...ys) > 100;
}

export function keyText(k) {
  if (!k) return '';
  let shape = k.shape;
  if (typeof shape === 'string') { try { shape = JSON.parse(shape); } catch (e) { /* as typed */ } }
  const sh = Array.isArray(shape) ? `[${shape.join('×')}]` : shape;
  return [k.kind && k.kind !== 'op' ? k.kind : null, k.op, k.dtype, sh, k.layout, k.input,
    k.device ? `on ${k.device}` : null].filter(Boolean).join(' · ');
}

function form(query) {
  const f = h('form.filters', {id: 'history-form', role: 'search', 'aria-label': 'Which test'},
    [...KEYS, 'limit'].map((k) => h('div.field', h('label', {for: `h-${k}`}, LABELS[k]),
      h('input', {id: `h-${k}`, name: k, value: query[k] || '', size: k === 'shape' ? 10 : 8,
        inputmode: k === 'limit' ? 'numeric' : null, required: k === 'op' || k === 'dtype'}))),
    h('div.field.actions', h('button', {type: 'submit'}, 'Show')));
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = href('/history', Object.fromEntries(new FormData(f)));
  });
  return f;
}

function pointsTable(points, m) {
  return h('div.table-wrap', h('table.data', {id: 'history-points'},
    h('caption', `${points.length} build${points.length === 1 ? '' : 's'}, oldest first`),
    h('thead', h('tr', ['Build', 'Verdict', m.label, 'Cases (failed)', 'Tolerance', 'Case', 'Job']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', points.map((p) => h('tr', {dataset: {build: p.build_id ?? '', verdict: p.verdict || ''}},
      h('td', {title: String(p.build_id ?? '')}, pointBuild(p)),
      h('td', badge(p.verdict || 'unknown')),
      h('td.num', num(p[m.key])),
      h('td.num', `${num(p.cases)}`, p.failed ? h('strong.bad', ` (${num(p.failed)})`) : ` (${num(p.failed)})`),
      h('td', tolMetric(p.tolerance)),
      h('td', p.case_id != null ? h('a', {href: `#/cases/${encodeURIComponent(p.case_id)}`}, `case ${p.case_id}`) : '—'),
      h('td', p.job_id != null ? h('a', {href: `#/jobs/${encodeURIComponent(p.job_id)}`}, `#${p.job_id}`) : '—'))))));
}

export async function renderHistory(ctx) {
  document.title = 'History across builds · numval';
  const {main, query} = ctx;
  main.append(h('h1', 'History across builds'), form(query));
  if (!query.op || !query.dtype) {
    main.append(empty('Choose a test: an op and a dtype at least (a case page links here with its whole key).'));
    return;
  }
  const params = Object.fromEntries([...KEYS, 'limit'].map((k) => [k, query[k]]));
  let body;
  try {
    body = await getJson('/history' + qs(params));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    const what = e.status === 404
      ? `No history from this server: GET /api/v1/history answered 404 (${e.message}). ` +
        'A numvald without the history API answers so for every test.'
      : `The server refused the history request: ${e.status} ${e.message}`;
    main.append(h('div.error', {id: 'history-error', role: 'alert'}, what));
    return;
  }
  const points = Array.isArray(body && body.points) ? body.points : [];
  const key = (body && body.key) || params;
  main.append(h('p', {id: 'history-key'}, h('strong', keyText(key))));
  if (!points.length) {
    main.append(section('Error by build', empty('No build ran this test.')));
    return;
  }
  const {metric, series, xTicks} = historySeries(points);
  const nFailed = points.filter((p) => p.verdict === 'failed').length;
  const chart = svgLineChart({series, xTicks, logY: wantLog(series), xLabel: 'build, oldest to newest',
    yLabel: metric.label,
    title: `${metric.label} of ${keyText(key)} on ${points.length} build${points.length === 1 ? '' : 's'}` +
      ` (${nFailed} failed)`});
  chart.id = 'history-chart';
  main.append(section('Error by build', h('p.muted', 'Each dot is the newest case of this test on a build; ' +
    'failed builds are rings with a cross. Dots and table rows link to the case.'), chart),
  section('Builds', pointsTable(points, metric)));
}

