// Pieces several views share: job tables, device names, tolerance text.

import {h, badge, num, when, duration, shortId} from '../util.js';
import {longrunProgress} from './longrun.js';

function progressBar(done, total, label, what) {
  const pct = total ? Math.round((100 * (done || 0)) / total) : 0;
  return h('span.progress', {title: `${pct}%`},
    h('progress', {max: total || 1, value: done || 0, 'aria-label': `${what} ${label}`}), ' ', label);
}

// A long-run job has no cases: its progress is training runs, then seeds × steps.
export function jobProgress(j) {
  if ((j.kind || (j.spec && j.spec.kind)) === 'longrun') {
    const p = longrunProgress(j);
    return progressBar(p.done, p.total, p.label, 'long-run');
  }
  const total = j.cases_total ?? null;
  const done = j.cases_done ?? null;
  if (total === null && done === null) return '—';
  const label = `${num(done ?? 0)} / ${num(total ?? '?')}`;
  return progressBar(done, total, label, 'cases done');
}

// Passed / failed cells: a long-run job has no case counts, its verdict says it.
function countCell(j, n, bad) {
  if ((j.kind || (j.spec && j.spec.kind)) === 'longrun') return h('td.num', {title: 'long-run jobs have no cases'}, '—');
  return h('td.num', bad && n ? h('strong.bad', num(n)) : num(n));
}

export function jobWhat(j) {
  const spec = j.spec || {};
  const amp = spec.kind === 'longrun' && spec.amp && spec.amp.dtype ? ` · ${spec.amp.dtype} AMP` : '';
  const what = j.op || spec.op || (spec.graph && spec.graph.name) || (typeof spec.model === 'string' ? spec.model : spec.name) || spec.check || '';
  return `${j.kind || spec.kind || '?'}${what ? ' · ' + what : ''}${amp}`;
}

export function jobsTable(jobs, {caption, buildNames} = {}) {
  return h('div.table-wrap', h('table.data',
    caption ? h('caption', caption) : null,
    h('thead', h('tr',
      ['Job', 'State', 'What', 'Device', 'Build', 'Progress', 'Passed', 'Failed', 'Created', 'Took']
        .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', jobs.map((j) => h('tr', {dataset: {job: j.id, state: j.state}},
      h('td', h('a', {href: `#/jobs/${encodeURIComponent(j.id)}`}, `#${j.id}`)),
      h('td', badge(j.state)),
      h('td', jobWhat(j)),
      h('td', j.device || j.leased_by ? h('a', {href: `#/devices?name=${encodeURIComponent(j.device || j.leased_by)}`,
        title: j.device ? null : 'submitted for any device; this one claimed it'}, j.device || j.leased_by) : 'any'),
      h('td', j.build_id != null ? h('span', {title: String(j.build_id)},
        (buildNames && buildNames[j.build_id]) || shortId(j.build_id, 10)) : '—'),
      h('td', jobProgress(j)),
      countCell(j, j.cases_passed, false),
      countCell(j, j.cases_failed, true),
      h('td', h('time', {datetime: j.created_at || ''}, when(j.created_at))),
      h('td', duration(j.started_at, j.finished_at)))))));
}

export function tolMetric(t) {
  if (!t) return '—';
  switch (t.metric) {
    case 'ulp': return `≤ ${num(t.max_ulp)} ULP`;
    case 'allclose': return `atol ${num(t.atol)} + rtol ${num(t.rtol)}·|ref|`;
    case 'bound': return `bound c=${num(t.c)} · g(n)=${t.growth || 'n'} · u(${t.u_dtype || 'out'})`;
    default: return t.metric ? String(t.metric) : JSON.stringify(t);
  }
}

export function tolReason(t) {
  if (!t) return '—';
  return h('span.reason', t.reason_code ? h('code', t.reason_code) : null,
    t.reason_code && t.reason ? ': ' : '', t.reason || '');
}

export function deviceState(d) {
  const st = d.state || (d.quarantined ? 'quarantined' : 'unknown');
  const reason = d.quarantine_reason || d.last_crash_reason || d.last_crash || d.last_error;
  return h('span', badge(st),
    reason && (st === 'quarantined' || d.quarantined) ? h('span.reason', ' ', reason) : null);
}

export function listOf(body, key) {
  if (!body) return [];
  if (Array.isArray(body)) return body;
  if (Array.isArray(body[key])) return body[key];
  return [];
}

// A build row with its identity fields lifted (the API nests them under "identity").
export function normBuild(b) {
  const id = b.identity && typeof b.identity === 'object' ? b.identity : {};
  return {...b, name: b.name ?? id.name, version: b.version ?? id.version,
    commit: b.commit ?? id.commit};
}

export function buildsOf(body) {
  return listOf(body, 'builds').map(normBuild);
}

// Human labels of the fields the worker and numvald put on a case (docs/RESULT_SCHEMA.md,
// docs/ARTIFACTS.md, docs/API.md), so no page shows a raw key. A key not listed reads
// as its words ("graph_hash" -> "graph hash").
export const FIELD_LABELS = {
  id: 'case id', job_id: 'job', index: 'case index', verdict: 'verdict', kind: 'kind',
  op: 'op', dtype: 'dtype', out_dtype: 'output dtype', acc_dtype: 'accumulation dtype',
  case_dtype: 'case dtype', shape: 'shape', layout: 'layout', input: 'input class', attrs: 'attributes',
  sample: 'sample', seed: 'seed', mode: 'numerical mode', graph: 'graph', graph_hash: 'graph hash',
  compared: 'elements compared', max_ulp: 'max ULP error', mean_ulp: 'mean ULP error',
  p99_ulp: 'p99 ULP error', max_abs: 'max abs error', max_rel: 'max rel error',
  mismatches: 'mismatches', nan_mismatches: 'NaN mismatches', inf_mismatches: 'Inf mismatches',
  headroom: 'headroom', failure_class: 'failure class', error: 'error', deterministic: 'deterministic',
  repeat: 'repeats', expect_error: 'expected error', expected_code: 'expected code',
  returned_code: 'returned code', fell_back: 'fell back to the host', flaky: 'flaky',
  artifact: 'artifact', minimized_artifact: 'minimized artifact', minimized_elements: 'minimized elements',
  repro_rate: 'reproduction rate', signature: 'failure signature', suite_case: 'suite case',
  tolerance: 'tolerance', tolerance_version: 'tolerance version', build_id: 'build', device: 'device',
  first_mismatches: 'first mismatching elements', first_divergent: 'first divergent node',
  ulp_histogram: 'element-wise ULP error histogram', nodes: 'nodes', check: 'check', checks: 'checks',
  reason: 'reason', reason_code: 'reason code', created_at: 'created', duration_ms: 'duration (ms)',
};

export function fieldLabel(key) {
  return FIELD_LABELS[key] ?? String(key).replace(/_/g, ' ');
}

// The label at the start of a row ("output dtype" -> "Output dtype").
export function fieldTitle(key) {
  const l = fieldLabel(key);
  return l.charAt(0).toUpperCase() + l.slice(1);
}

// What a tolerance allows, as a comparable key: the metric and its parameters
// (not the reason or the version: a new version with the same limit is no change).
export function tolLimit(t) {
  if (!t || typeof t !== 'object') return null;
  const keys = ['metric', 'max_ulp', 'atol', 'rtol', 'c', 'growth', 'u_dtype'];
  return JSON.stringify(keys.map((k) => t[k] ?? null));
}
