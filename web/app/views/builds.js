// Builds and build compare (newly failing, fixed, error growth, with the tolerance
// each side was judged by). Compare appears when the server offers GET /api/v1/compare.

import {h, num, when, section, empty, shortId, kv, badge} from '../util.js';
import {optional, getJson, ApiError} from '../api.js';
import {href} from '../router.js';
import {buildsOf, tolMetric, tolLimit} from './common.js';

export function buildLabel(b) {
  return `${b.name || shortId(b.id)}${b.version ? ' ' + b.version : ''}${b.commit ? ' @' + String(b.commit).slice(0, 8) : ''}`;
}

// The build a compare reference names, as numvald resolves it (docs/API.md
// "Compare"; daemon/store/store_compare.c): its id (the build hash), else the
// newest build (the first: GET /builds lists newest first) whose name or version it
// is. Null when none matches.
export function resolveBuild(builds, ref) {
  if (ref === undefined || ref === null || ref === '') return null;
  const r = String(ref);
  return builds.find((b) => String(b.id) === r || (b.hash != null && String(b.hash) === r))
    || builds.find((b) => (b.version != null && String(b.version) === r) || (b.name != null && String(b.name) === r))
    || null;
}

// The pair the form shows: what the query names, else head = the newest build and
// base = its predecessor (the build before it in the newest-first list).
export function comparePair(builds, query) {
  const head = resolveBuild(builds, query.head) || builds[0] || null;
  let base = resolveBuild(builds, query.base);
  if (!base) {
    const i = head ? builds.indexOf(head) : -1;
    base = builds[i + 1] || builds.find((b) => b !== head) || null;
  }
  return {base, head};
}

function compareForm(builds, query) {
  const {base, head} = comparePair(builds, query);
  const opts = (sel) => builds.map((b) => h('option', {value: b.id, selected: b === sel}, buildLabel(b)));
  const enough = builds.length >= 2;
  const unknown = ['base', 'head'].filter((k) => query[k] && !resolveBuild(builds, query[k]));
  const f = h('form.filters', {id: 'compare-form', 'aria-label': 'Compare two builds'},
    h('div.field', h('label', {for: 'c-base'}, 'Base build'), h('select', {id: 'c-base', name: 'base'}, opts(base))),
    h('div.field', h('label', {for: 'c-head'}, 'Head build'), h('select', {id: 'c-head', name: 'head'}, opts(head))),
    h('div.field.actions', h('button', {type: 'submit', disabled: !enough, 'aria-describedby': enough ? null : 'compare-note'},
      'Compare')),
    !enough ? h('p.muted.field.wide', {id: 'compare-note', role: 'status'},
      `Compare needs two builds; ${builds.length} registered.`) : null,
    unknown.length ? h('p.error.field.wide', {id: 'compare-unknown', role: 'alert'},
      unknown.map((k) => `No build '${query[k]}' for ${k}.`).join(' ')) : null);
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
  main.append(h('h1', 'Builds'), section('Compare two builds', compareForm(builds, query)));
  if (!builds.length) {
    main.append(section('All builds', empty('No builds recorded yet.')));
    return;
  }
  main.append(
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

// The tolerance a side was judged by ("—" when the server sends none).
export function tolText(t) {
  if (!t || typeof t !== 'object') return '—';
  const v = t.version != null && Number(t.version) > 0 ? ` (v${t.version})` : '';
  return `${tolMetric(t)}${v}`;
}

function tolCell(t, cls) {
  if (!t || typeof t !== 'object') return h(`td.${cls}`, '—');
  return h(`td.${cls}`, {title: [t.reason_code, t.reason].filter(Boolean).join(': ') || null}, tolText(t));
}

// Both sides carry a tolerance and what they allow differs.
export function tolChanged(entry) {
  const a = entry && entry.base && entry.base.tolerance, b = entry && entry.head && entry.head.tolerance;
  return Boolean(a && b && tolLimit(a) !== tolLimit(b));
}

function caseList(title, list, id, growth, note, total) {
  const shown = total != null && total > list.length ? `${list.length} of ${total}` : `${list.length}`;
  const changed = list.filter(tolChanged).length;
  return section(`${title} (${shown})`, note || null,
    changed ? h('p', {class: 'tol-note'}, h('strong', `${changed} of these`),
      ' were judged by a different tolerance on the two builds (rows marked "tolerance changed").') : null,
    list.length ? h('div.table-wrap', h('table.data', {id},
      h('thead', h('tr', ['Case (kind · op or graph · dtype · shape · layout · input)', 'Base', 'Head',
        'Base tolerance', 'Head tolerance', growth ? 'Growth' : null]
        .filter(Boolean).map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', list.map((c) => {
        const ch = tolChanged(c);
        return h('tr', {class: ch ? 'tol-changed' : null, dataset: {tolChanged: ch ? 'true' : 'false'}},
          h('td', matchText(c.match), ch ? h('span.tag.tol-flag', ' tolerance changed') : null),
          sideCell(c.base), sideCell(c.head),
          tolCell(c.base && c.base.tolerance, 'tol-base'), tolCell(c.head && c.head.tolerance, 'tol-head'),
          growth ? h('td.num', `×${num(c.growth)}`) : null);
      })))) : empty('None.'));
}

export async function renderCompare(ctx) {
  document.title = 'Build compare · numval';
  const {main, query} = ctx;
  const builds = buildsOf(await optional('/builds'));
  main.append(h('p.crumbs', h('a', {href: '#/builds'}, 'Builds'), ' › compare'), h('h1', 'Build compare'),
    compareForm(builds, query));
  if (!query.base || !query.head) {
    main.append(empty(builds.length >= 2 ? 'Choose a base and a head build.' : 'Nothing to compare yet.'));
    return;
  }
  let r;
  try {
    r = await getJson(`/compare?base=${encodeURIComponent(query.base)}&head=${encodeURIComponent(query.head)}`);
  } catch (e) {
    // 404: an unknown build (numvald names it) or no compare on this server; 413: too many cases.
    if (!(e instanceof ApiError) || e.status === 0) throw e;
    main.append(section('Result', h('div.error', {id: 'cmp-error', role: 'alert'}, `${e.status}: ${e.message}`)));
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
    cnt.matched === 0 ? h('p.error', {id: 'cmp-nothing', role: 'status'}, 'No case of the head matches a case of the base: '
      + 'this compare checked nothing (a CI gate on it should fail).') : null,
    r.truncated ? h('p.muted', {id: 'cmp-truncated'}, 'Each list shows its first 1000 entries; the counts above are the totals.') : null),
    caseList('Newly failing', arr('newly_failing'), 'cmp-failing', false, null, cnt.newly_failing),
    caseList('Fixed (newly passing)', arr('newly_passing'), 'cmp-fixed', false, null, cnt.newly_passing),
    caseList('Error growth within tolerance', arr('drift'), 'cmp-growth', true,
      r.drift_rule ? h('p.muted', `Rule: ${r.drift_rule}.`) : null, cnt.drift));
}
