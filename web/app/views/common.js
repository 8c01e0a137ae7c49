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
  const what = j.op || spec.op || (spec.graph && spec.graph.name) || spec.model || '';
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
