// Builds and build compare (newly failing, fixed, error growth). Compare appears
// when the server offers GET /api/v1/compare (issue 6).

import {h, num, when, section, empty, shortId, kv} from '../util.js';
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

function caseList(title, list, id) {
  return section(title, list.length ? h('div.table-wrap', h('table.data', {id},
    h('thead', h('tr', ['Case', 'Op · dtype', 'Base', 'Head'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((c) => {
      const base = c.base || {}, head = c.head || {};
      return h('tr',
        h('td', c.case_id || head.id ? h('a', {href: `#/cases/${encodeURIComponent(c.case_id || head.id)}`}, c.signature || c.name || `case ${c.case_id || head.id}`) : (c.signature || c.name || '—')),
        h('td', `${c.op || head.op || '—'} · ${c.dtype || head.dtype || '—'}`),
        h('td', base.verdict ? `${base.verdict}, ${num(base.max_ulp)} ULP` : num(c.base_max_ulp ?? c.base_error)),
        h('td', head.verdict ? `${head.verdict}, ${num(head.max_ulp)} ULP` : num(c.head_max_ulp ?? c.head_error)));
    })))) : empty('None.'));
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
    main.append(section('Result', empty('No data yet: this server does not offer build compare.')));
    return;
  }
  const arr = (k, ...alts) => [k, ...alts].map((x) => r[x]).find(Array.isArray) || [];
  main.append(
    r.summary ? section('Summary', kv(Object.entries(r.summary).map(([k, v]) => [k, num(v)]))) : null,
    caseList('Newly failing', arr('newly_failing', 'new_failures'), 'cmp-failing'),
    caseList('Fixed (newly passing)', arr('newly_passing', 'fixed'), 'cmp-fixed'),
    caseList('Error growth within tolerance', arr('error_growth', 'drift'), 'cmp-growth'));
}
