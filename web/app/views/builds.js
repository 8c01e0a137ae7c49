// Builds and build compare (newly failing, fixed, error growth). Compare appears
// when the server offers GET /api/v1/compare.

import {h, num, when, section, empty, shortId, kv, badge} from '../util.js';
import {optional} from '../api.js';
import {href} from '../router.js';
import {buildsOf} from './common.js';

function buildLabel(b) {
  return `${b.name || shortId(b.id)}${b.version ? ' ' + b.version : ''}${b.commit ? ' @' + String(b.commit).slice(0, 8) : ''}`;
}

function compareForm(builds, query) {
  const opts = (sel) => builds.map((b) => h('option', {value: b.id, selected: String(b.id) === sel}, buildLabel(b)));
  const f = h('form.filters', {id: 'compare-form'},
    h('div.field', h('label', {for: 'c-base'}, 'Base build'), h('select', {id: 'c-base', name: 'base'}, opts(query.base))),
    h('div.field', h('label', {for: 'c-head'}, 'Head build'), h('select', {id: 'c-head', name: 'head'}, opts(query.head))),
    h('div.field.actions', h('button', {type: 'submit'}, 'Compare')));
  f.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = href('/compare', Object.fromEntries(new FormData(f)));
  });
  return f;
}

export async function renderBuilds(ctx) {
  document.title = 'Builds · numval';
  const {main, query} = ctx;
  const body = await optional('/builds');
  const builds = buildsOf(body);
  main.append(h('h1', 'Builds'));
  if (!builds.length) {
    main.append(section('Builds', empty('No builds recorded yet.')));
    return;
  }
  main.append(section('Compare two builds', builds.length > 1 ? compareForm(builds, query) : empty('Compare needs two builds.')),
    section('All builds', h('div.table-wrap', h('table.data', {id: 'builds'},
      h('thead', h('tr', ['Build', 'Version', 'Commit', 'Identity', 'Seen', 'Jobs'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', builds.map((b) => h('tr',
        h('td', b.name || shortId(b.id)), h('td', b.version || '—'), h('td', h('code', shortId(b.commit || '—', 12))),
        h('td', h('details', h('summary', shortId(b.id, 12)), h('pre.json', JSON.stringify(b.identity || b, null, 2)))),
        h('td', when(b.created_at)),
        h('td', h('a', {href: `#/jobs?build=${encodeURIComponent(b.id)}`}, 'jobs')))))))));
}

export function matchText(m) {
  if (!m) return '—';
  if (m.kind === 'fused') {
    return `fused · ${m.graph || '?'} · ${m.dtype || '?'} · ${m.input || '?'} · graph ${shortId(m.graph_hash || '', 12)}`;
  }
  const attrs = m.attrs && Object.keys(m.attrs).length ? ` ${JSON.stringify(m.attrs)}` : '';
  const kind = m.kind && m.kind !== 'op' ? `${m.kind}${m.mode ? ' (' + m.mode + ')' : ''} · ` : '';
  return `${kind}${m.op || '?'} · ${m.dtype || '?'} · [${(m.shape || []).join('×')}] · ${m.layout || '?'} · ${m.input || '?'}${attrs}`;
}

// Op and fused cases carry max ULP; gradient cases the device check's headroom
// (largest error over its allowance, <= 1 passes).
function metricText(x) {
  if (x.headroom !== undefined) return ` headroom ${num(x.headroom)}`;
  return ` ${num(x.max_ulp)} ULP`;
}

function sideCell(x) {
  if (!x) return h('td', '—');
  return h('td', x.case_id != null ? h('a', {href: `#/cases/${encodeURIComponent(x.case_id)}`}, `case ${x.case_id}`) : '',
    ' ', badge(x.verdict || 'unknown'), metricText(x),
    x.failure_class ? h('span.muted', ` ${x.failure_class}`) : null);
}

function caseList(title, list, id, growth, note, total) {
  const shown = total != null && total > list.length ? `${list.length} of ${total}` : `${list.length}`;
  return section(`${title} (${shown})`, note || null, list.length ? h('div.table-wrap', h('table.data', {id},
    h('thead', h('tr', ['Case (kind · op or graph · dtype · shape · layout · input)', 'Base', 'Head', growth ? 'Growth' : null]
      .filter(Boolean).map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((c) => h('tr',
      h('td', matchText(c.match)), sideCell(c.base), sideCell(c.head),
      growth ? h('td.num', `×${num(c.growth)}`) : null))))) : empty('None.'));
}

export async function renderCompare(ctx) {
  document.title = 'Build compare · numval';
  const {main, query} = ctx;
  const builds = buildsOf(await optional('/builds'));
  main.append(h('p.crumbs', h('a', {href: '#/builds'}, 'Builds'), ' › compare'), h('h1', 'Build compare'));
  if (builds.length > 1) main.append(compareForm(builds, query));
  if (!query.base || !query.head) {
    main.append(empty('Choose a base and a head build.'));
    return;
  }
  const r = await optional(`/compare?base=${encodeURIComponent(query.base)}&head=${encodeURIComponent(query.head)}`);
  if (r === null) {
    main.append(section('Result', empty('No data for these builds (unknown build, or no build compare on this server).')));
    return;
  }
  const arr = (k) => (Array.isArray(r[k]) ? r[k] : []);
  const label = (hash) => {
    const b = builds.find((x) => String(x.id) === String(hash));
    return b ? buildLabel(b) : shortId(hash, 16);
  };
  const cnt = r.counts || {};
  main.append(
    section('Summary', h('div', {id: 'cmp-summary'}, kv([
      ['Base', label(r.base)], ['Head', label(r.head)],
      ['Matched cases', num(cnt.matched)], ['Only in base', num(cnt.only_in_base)], ['Only in head', num(cnt.only_in_head)],
      ['Newly failing', num(cnt.newly_failing ?? arr('newly_failing').length)],
      ['Fixed', num(cnt.newly_passing ?? arr('newly_passing').length)],
      ['Error growth', num(cnt.drift ?? arr('drift').length)],
    ])), h('p.muted', 'Op cases match by op, dtype, shape, layout, input class and attributes; gradient cases also by check mode; '
      + 'fused cases by graph name and hash, dtype and input class. The newest case of a match counts.'),
    r.truncated ? h('p.muted', {id: 'cmp-truncated'}, 'Each list shows its first 1000 entries; the counts above are the totals.') : null),
    caseList('Newly failing', arr('newly_failing'), 'cmp-failing', false, null, cnt.newly_failing),
    caseList('Fixed (newly passing)', arr('newly_passing'), 'cmp-fixed', false, null, cnt.newly_passing),
    caseList('Error growth within tolerance', arr('drift'), 'cmp-growth', true,
      r.drift_rule ? h('p.muted', `Rule: ${r.drift_rule}.`) : null, cnt.drift));
}
