// Case detail: verdict, metrics, tolerance with its reason and version history,
// first mismatching elements, artifact download, the repro command; fused and
// long-run sections appear when the case carries their data.

import {h, num, badge, kv, section, empty, errorBox, exact, copyable, qs, when} from '../util.js';
import {getJson, optional, apiUrl, getToken} from '../api.js';
import {tolMetric, tolReason, listOf} from './common.js';
import {fusedSection} from './fused.js';

const SHOWN = new Set(['id', 'job_id', 'index', 'verdict', 'op', 'dtype', 'shape', 'layout',
  'input', 'seed', 'max_ulp', 'mean_ulp', 'p99_ulp', 'max_abs', 'max_rel', 'mismatches',
  'failure_class', 'headroom', 'deterministic', 'tolerance', 'first_mismatches', 'error',
  'artifact', 'tolerance_version', 'build_id', 'device', 'nodes', 'graph', 'curves',
  'first_divergent', 'first_divergent_node', 'series']);

function mismatchTable(list) {
  if (!list || !list.length) return empty('No mismatching elements recorded.');
  return h('div.table-wrap', h('table.data', {id: 'mismatches'},
    h('caption', `First ${list.length} mismatching element${list.length > 1 ? 's' : ''}`),
    h('thead', h('tr', ['Index', 'Inputs', 'Device', 'Exact', 'ULP error', 'Abs error', 'Allowed', 'Kind']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((m) => h('tr',
      h('td', h('code', Array.isArray(m.index) ? `[${m.index.join(', ')}]` : exact(m.index))),
      h('td', h('code', Array.isArray(m.inputs) ? m.inputs.map(exact).join(', ') : exact(m.inputs))),
      h('td', h('code.got', exact(m.got))),
      h('td', h('code.exact', exact(m.exact))),
      h('td.num', num(m.ulp_error)),
      h('td.num', num(m.abs_error)),
      h('td.num', num(m.allowed)),
      h('td', m.kind || '—'))))));
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

function artifactLink(c) {
  if (!c.artifact) return empty('No artifact stored for this case.');
  const url = apiUrl(`/artifacts/${encodeURIComponent(c.artifact)}`);
  const name = `numval-case-${c.id}-${String(c.artifact).slice(0, 12)}.zst`;
  const status = h('span.action-status', {'aria-live': 'polite'});
  const a = h('a.button', {href: url, download: name, id: 'artifact-link'}, 'Download artifact');
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
  return h('div', a, ' ', h('code.sha', c.artifact), ' ', status);
}

export async function renderCase(ctx) {
  const {main, params} = ctx;
  const id = params.id;
  document.title = `Case ${id} · numval`;
  const c = (await getJson(`/cases/${encodeURIComponent(id)}`)).case;
  const t = c.tolerance || null;
  const usedVersion = c.tolerance_version ?? (t ? t.version : null);
  const title = `Case ${id}: ${c.op || ''} ${c.dtype || ''}`.trim();

  const more = Object.entries(c).filter(([k, v]) => !SHOWN.has(k) && (typeof v !== 'object' || v === null));
  const extra = Object.entries(c).filter(([k, v]) => !SHOWN.has(k) && v && typeof v === 'object');

  main.append(
    h('p.crumbs', h('a', {href: '#/jobs'}, 'Jobs'), ' › ',
      h('a', {href: `#/jobs/${encodeURIComponent(c.job_id)}`}, `#${c.job_id}`), ' › ', `case ${c.index ?? id}`),
    h('h1', title, ' ', badge(c.verdict)),
    section('Verdict', kv([
      ['Verdict', badge(c.verdict)],
      ['Failure class', c.failure_class ? h('strong.bad', c.failure_class) : undefined],
      ['Error', c.error ? h('span.bad', c.error) : undefined],
      ['Job', h('a', {href: `#/jobs/${encodeURIComponent(c.job_id)}`}, `#${c.job_id}`)],
      ['Case index', num(c.index)],
      ['Device', c.device ? h('a', {href: `#/devices?name=${encodeURIComponent(c.device)}`}, String(c.device)) : undefined],
      ['Build', c.build_id != null ? String(c.build_id) : undefined],
      ['Op · dtype', `${c.op || '—'} · ${c.dtype || '—'}`],
      ['Shape', c.shape ? `[${c.shape.join(' × ')}]` : undefined],
      ['Layout', c.layout], ['Input class', c.input], ['Seed', c.seed != null ? String(c.seed) : undefined],
      ['Deterministic', c.deterministic === undefined ? undefined : String(c.deterministic)],
      ...more.map(([k, v]) => [k, String(v)]),
    ]), h('div.metrics', kv([
      ['Max ULP', num(c.max_ulp)], ['Mean ULP', num(c.mean_ulp)], ['p99 ULP', num(c.p99_ulp)],
      ['Max abs error', num(c.max_abs)], ['Max rel error', num(c.max_rel)],
      ['Mismatches', num(c.mismatches)], ['Headroom', num(c.headroom)],
    ]))),
    fusedSection(c),
    section('Tolerance', t ? h('div', {id: 'tolerance'}, kv([
      ['Allowed', tolMetric(t)],
      ['Reason', tolReason(t)],
      ['Version', usedVersion ? `v${usedVersion}` : 'none (shipped default or job override)'],
      ['Source', t.source],
    ])) : empty('This case records no tolerance.'),
    h('h3', 'Version history'), h('div', {id: 'tol-history-box'}, h('p.muted', 'Loading…'))),
    section('First mismatching elements', mismatchTable(c.first_mismatches)),
    section('Reproduce', h('div', {id: 'artifact'}, artifactLink(c)),
      h('p', 'Re-run this case at your desk (downloads the artifact and runs it through ',
        h('code', 'numval-worker run'), ' with the same backend):'),
      copyable(`numvalctl --server ${location.origin} repro ${id}`)),
  );
  if (extra.length) {
    main.append(section('More data', ...extra.map(([k, v]) =>
      h('details', h('summary', k), h('pre.json', JSON.stringify(v, null, 2))))));
  }

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
