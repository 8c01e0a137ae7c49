// The cases table of a job: verdict filter and cursor paging on the server (so a
// 100,000-case job opens with one small request), sorting and a text filter over
// the page in view.

import {h, num, badge, empty, qs} from '../util.js';
import {getJson} from '../api.js';
import {href} from '../router.js';
import {tolMetric, listOf} from './common.js';
import {elementBins} from '../charts.js';
import {toCsv, downloadText} from '../csv.js';

const COLS = [
  {key: 'index', label: '#', num: true},
  {key: 'verdict', label: 'Verdict'},
  {key: 'dtype', label: 'Dtype'},
  {key: 'shape', label: 'Shape', text: (c) => (c.shape ? `[${c.shape.join('×')}]` : '—')},
  {key: 'layout', label: 'Layout'},
  {key: 'input', label: 'Input'},
  {key: 'max_ulp', label: 'Max ULP', num: true},
  {key: 'mean_ulp', label: 'Mean ULP', num: true},
  {key: 'p99_ulp', label: 'p99 ULP', num: true},
  {key: 'max_abs', label: 'Max abs', num: true},
  {key: 'max_rel', label: 'Max rel', num: true},
  {key: 'mismatches', label: 'Mismatches', num: true},
  {key: 'headroom', label: 'Headroom', num: true},
  {key: 'failure_class', label: 'Failure'},
  {key: 'tolerance', label: 'Tolerance', text: (c) => tolMetric(c.tolerance)},
];

function cmp(a, b) {
  const na = typeof a === 'number', nb = typeof b === 'number';
  if (na && nb) return a - b;
  if (a === undefined || a === null) return 1;
  if (b === undefined || b === null) return -1;
  return String(a).localeCompare(String(b), undefined, {numeric: true});
}

export function casesTable(job, query, base) {
  const verdict = query.verdict || '';
  const limit = Number(query.limit) || 100;
  const state = {sort: 'index', dir: 1, filter: '', cases: [], next: null};
  const status = h('p.muted', {'aria-live': 'polite'});
  const tableBox = h('div');
  const pager = h('nav.pager', {'aria-label': 'Case pages'});

  const filterId = 'case-filter';
  // Download CSV: every case of the job under this verdict filter (all pages, not
  // only the one in view), made into a file in the page.
  const csvStatus = h('span.action-status', {'aria-live': 'polite'});
  const csvName = `numval-job-${job.id}${verdict ? '-' + verdict : ''}-cases.csv`;
  const csvLink = h('a.button.secondary', {href: '#', id: 'cases-csv', download: csvName,
    onclick: async (ev) => {
      ev.preventDefault();
      if (csvLink.getAttribute('aria-disabled') === 'true') return;
      csvLink.setAttribute('aria-disabled', 'true');
      try {
        csvStatus.textContent = 'Fetching cases…';
        const all = await allCases(job.id, verdict, (n) => { csvStatus.textContent = `Fetching cases… ${num(n)}`; });
        downloadText(casesCsv(all), csvName);
        csvStatus.textContent = `${num(all.length)} cases saved as ${csvName}.`;
      } catch (e) {
        csvStatus.textContent = `Could not export: ${e.message}`;
      } finally {
        csvLink.removeAttribute('aria-disabled');
      }
    }}, 'Download CSV');
  const controls = h('div.filters',
    h('div.field', h('span.label', 'Verdict'), h('div.seg', {role: 'group', 'aria-label': 'Verdict'},
      ['', 'failed', 'passed', 'error'].map((v) => h('a.button.secondary', {
        href: href(base, {...query, verdict: v, cursor: ''}),
        'aria-current': v === verdict ? 'true' : null}, v || 'all')))),
    h('div.field', h('label', {for: filterId}, 'Filter this page'),
      h('input', {id: filterId, type: 'search', placeholder: 'dtype, layout, input…',
        oninput: (e) => { state.filter = e.target.value.toLowerCase(); draw(); }})),
    h('div.field.actions', csvLink, csvStatus));

  function value(c, col) { return col.text ? col.text(c) : c[col.key]; }

  function draw() {
    let rows = state.cases;
    if (state.filter) {
      rows = rows.filter((c) => COLS.some((col) =>
        String(value(c, col) ?? '').toLowerCase().includes(state.filter)));
    }
    const col = COLS.find((x) => x.key === state.sort);
    rows = [...rows].sort((a, b) => state.dir * cmp(value(a, col), value(b, col)));
    if (!state.cases.length) {
      tableBox.replaceChildren(empty(verdict ? `No ${verdict} cases.` : 'No cases stored yet.'));
      return;
    }
    const head = h('tr', COLS.map((c) => {
      const sorted = c.key === state.sort;
      return h('th', {scope: 'col', 'aria-sort': sorted ? (state.dir > 0 ? 'ascending' : 'descending') : 'none'},
        h('button.sort', {type: 'button', onclick: () => {
          state.dir = sorted ? -state.dir : (c.num ? -1 : 1);
          state.sort = c.key;
          draw();
          tableBox.querySelector(`th button[data-key="${c.key}"]`)?.focus();
        }, dataset: {key: c.key}}, c.label, sorted ? (state.dir > 0 ? ' ▲' : ' ▼') : ''));
    }));
    tableBox.replaceChildren(h('div.table-wrap', h('table.data.cases', {id: 'cases-table'},
      h('thead', head),
      h('tbody', rows.map((c) => h('tr', {dataset: {verdict: c.verdict}},
        COLS.map((col) => {
          if (col.key === 'index') {
            return h('td.num', c.id != null
              ? h('a', {href: `#/cases/${encodeURIComponent(c.id)}`, 'aria-label': `case ${c.index} (${c.verdict})`}, `#${c.index}`)
              : `#${c.index}`);
          }
          if (col.key === 'verdict') return h('td', badge(c.verdict));
          const v = value(c, col);
          return h(col.num ? 'td.num' : 'td', col.num ? num(v) : (v ?? '—'));
        })))))));
    status.textContent = `${rows.length} of ${state.cases.length} cases on this page` +
      (job.cases_total != null ? ` (job has ${num(job.cases_total)})` : '') + '.';
  }

  async function load() {
    const body = await getJson(`/jobs/${encodeURIComponent(job.id)}/cases` +
      qs({verdict, limit, cursor: query.cursor}));
    state.cases = listOf(body, 'cases');
    state.next = body.next_cursor || null;
    draw();
    const b = {...query};
    delete b.cursor;
    pager.replaceChildren(...[
      query.cursor ? h('a.button.secondary', {href: href(base, b)}, '« First page') : null,
      query.cursor ? h('button.secondary', {type: 'button', onclick: () => history.back()}, '‹ Previous') : null,
      state.next ? h('a.button', {href: href(base, {...b, cursor: state.next}), rel: 'next'}, 'Next cases ›') : null,
    ].filter(Boolean));
  }

  return {el: h('div', controls, status, tableBox, pager), load};
}

// Scans cases in large pages in the background for the histogram; stops at `max`.
// values: each case's max_ulp; hists: each case's element-wise histogram or null.
export async function scanUlps(jobId, verdict, max, onProgress, alive) {
  const values = [], hists = [];
  let cursor = '';
  do {
    const body = await getJson(`/jobs/${encodeURIComponent(jobId)}/cases` +
      qs({verdict, limit: 1000, cursor}));
    for (const c of listOf(body, 'cases')) {
      values.push(c.max_ulp);
      hists.push(elementBins(c.ulp_histogram));
    }
    cursor = body.next_cursor || '';
    onProgress(values, !cursor);
  } while (cursor && values.length < max && alive());
  return {values, hists, complete: !cursor};
}

// Every case of a job (of one verdict when given), page after page of the cursor API.
export async function allCases(jobId, verdict, onProgress = () => {}) {
  const out = [];
  let cursor = '';
  do {
    const body = await getJson(`/jobs/${encodeURIComponent(jobId)}/cases` + qs({verdict, limit: 1000, cursor}));
    out.push(...listOf(body, 'cases'));
    cursor = body.next_cursor || '';
    onProgress(out.length);
  } while (cursor);
  return out;
}

// The CSV columns of a case table: values as stored (full precision), the shape as
// JSON, the tolerance as its limit and its version.
export const CSV_COLS = [
  ['case_id', (c) => c.id], ['job_id', (c) => c.job_id], ['index', (c) => c.index], ['verdict', (c) => c.verdict],
  ['op', (c) => c.op], ['dtype', (c) => c.dtype], ['out_dtype', (c) => c.out_dtype],
  ['shape', (c) => (Array.isArray(c.shape) ? JSON.stringify(c.shape) : c.shape)], ['layout', (c) => c.layout],
  ['input', (c) => c.input], ['seed', (c) => c.seed], ['max_ulp', (c) => c.max_ulp], ['mean_ulp', (c) => c.mean_ulp],
  ['p99_ulp', (c) => c.p99_ulp], ['max_abs', (c) => c.max_abs], ['max_rel', (c) => c.max_rel],
  ['mismatches', (c) => c.mismatches], ['headroom', (c) => c.headroom], ['failure_class', (c) => c.failure_class],
  ['tolerance', (c) => (c.tolerance ? tolMetric(c.tolerance) : null)],
  ['tolerance_version', (c) => c.tolerance_version], ['device', (c) => c.device], ['build_id', (c) => c.build_id],
];

export function casesCsv(cases) {
  return toCsv(CSV_COLS.map(([k]) => k), cases.map((c) => CSV_COLS.map(([, f]) => f(c))));
}
