// Tolerances: current versions, history per (op, dtype), headroom between the
// error observed in recent jobs and what is allowed, and a form to set a new version.

import {h, num, when, section, empty, errorBox, qs} from '../util.js';
import {getJson, optional, post} from '../api.js';
import {writeAction} from '../auth.js';
import {href, go} from '../router.js';
import {tolMetric, tolReason, listOf} from './common.js';

const REASONS = ['dtype_precision', 'reduction_length', 'approximation_error', 'stochastic',
  'accepted_fast_algorithm'];
const RECENT_JOBS = 10;


// Observed error per (op, dtype, tolerance judged by) over the cases of the latest
// finished jobs. A case's "headroom" is observed error over allowed (1 = at the limit).
async function observed() {
  const groups = new Map();
  const jobs = [];
  for (const st of ['passed', 'failed']) {
    const b = await getJson(`/jobs?state=${st}&limit=${RECENT_JOBS}`);
    jobs.push(...listOf(b, 'jobs'));
  }
  jobs.sort((a, b) => String(b.finished_at).localeCompare(String(a.finished_at)));
  const used = jobs.slice(0, RECENT_JOBS);
  for (const j of used) {
    const b = await getJson(`/jobs/${encodeURIComponent(j.id)}/cases?limit=1000`);
    for (const c of listOf(b, 'cases')) {
      if (!c.op || !c.dtype) continue;
      const t = c.tolerance || {};
      const key = `${c.op}/${c.dtype}/${tolMetric(t)}/${t.source || ''}/${t.version ?? ''}`;
      const g = groups.get(key) || {op: c.op, dtype: c.dtype, tol: t, cases: 0, failed: 0,
        maxUlp: null, maxHeadroom: null, jobs: new Set()};
      g.cases++;
      if (c.verdict === 'failed') g.failed++;
      g.jobs.add(j.id);
      const u = Number(c.max_ulp), hr = Number(c.headroom);
      if (Number.isFinite(u)) g.maxUlp = g.maxUlp === null ? u : Math.max(g.maxUlp, u);
      if (Number.isFinite(hr)) g.maxHeadroom = g.maxHeadroom === null ? hr : Math.max(g.maxHeadroom, hr);
      groups.set(key, g);
    }
  }
  return {groups: [...groups.values()], jobs: used.length};
}

function observedTable(obs) {
  if (!obs.groups.length) return empty('No finished jobs with cases yet.');
  const rows = obs.groups.sort((a, b) => (b.maxHeadroom ?? -1) - (a.maxHeadroom ?? -1));
  return h('div.table-wrap', h('table.data', {id: 'tol-headroom'},
    h('caption', `Observed error against the tolerance each case was judged by (up to 1000 cases of each of the latest ${obs.jobs} finished jobs)`),
    h('thead', h('tr', ['Op', 'Dtype', 'Allowed', 'Reason', 'Source', 'Cases', 'Failed', 'Max ULP seen', 'Used of allowed']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', rows.map((g) => {
      const r = g.maxHeadroom;
      const cls = r === null ? '' : r > 1 ? 'bad' : r < 0.1 ? 'loose' : '';
      return h('tr',
        h('td', g.op), h('td', g.dtype), h('td', tolMetric(g.tol)), h('td', tolReason(g.tol)),
        h('td', `${g.tol.source || '—'}${g.tol.version ? ' v' + g.tol.version : ''}`),
        h('td.num', num(g.cases)), h('td.num', g.failed ? h('strong.bad', num(g.failed)) : '0'),
        h('td.num', num(g.maxUlp)),
        h('td.num', {class: cls, title: 'largest observed error / allowed error'},
          r === null ? '—' : `${num(r * 100)}%`, r !== null && r < 0.1 ? ' (loose?)' : ''));
    }))));
}

function headroomCell(t, groups) {
  const mine = (groups || []).filter((g) => g.op === t.op && g.dtype === t.dtype &&
    g.tol.source === 'store' && Number(g.tol.version) === Number(t.version));
  if (!mine.length) return h('td.num', groups ? 'no cases yet' : '…');
  const r = Math.max(...mine.map((g) => g.maxHeadroom ?? 0));
  const cls = r > 1 ? 'bad' : r < 0.1 ? 'loose' : '';
  return h('td.num', {class: cls}, `${num(r * 100)}%`, r < 0.1 ? ' (loose?)' : '');
}

function form(query) {
  const status = h('p.action-status', {'aria-live': 'polite'});
  const f = h('form.tol-form', {id: 'tol-form'},
    h('div.field', h('label', {for: 't-op'}, 'Op'), h('input', {id: 't-op', name: 'op', value: query.op || '', required: true})),
    h('div.field', h('label', {for: 't-dtype'}, 'Dtype'), h('input', {id: 't-dtype', name: 'dtype', value: query.dtype || '', required: true})),
    h('div.field', h('label', {for: 't-mode'}, 'Device mode pattern'), h('input', {id: 't-mode', name: 'mode', value: '*'})),
    h('div.field', h('label', {for: 't-metric'}, 'Metric'), h('select', {id: 't-metric', name: 'metric'},
      ['ulp', 'allclose', 'bound'].map((m) => h('option', {value: m}, m)))),
    h('div.field', h('label', {for: 't-max-ulp'}, 'max_ulp'), h('input', {id: 't-max-ulp', name: 'max_ulp', inputmode: 'decimal'})),
    h('div.field', h('label', {for: 't-atol'}, 'atol'), h('input', {id: 't-atol', name: 'atol', inputmode: 'decimal'})),
    h('div.field', h('label', {for: 't-rtol'}, 'rtol'), h('input', {id: 't-rtol', name: 'rtol', inputmode: 'decimal'})),
    h('div.field', h('label', {for: 't-c'}, 'bound c'), h('input', {id: 't-c', name: 'c', inputmode: 'decimal'})),
    h('div.field', h('label', {for: 't-growth'}, 'bound g(n)'), h('select', {id: 't-growth', name: 'growth'},
      ['', 'n', 'log2n', 'sqrtn'].map((m) => h('option', {value: m}, m || '—')))),
    h('div.field', h('label', {for: 't-rc'}, 'Reason code'), h('select', {id: 't-rc', name: 'reason_code'},
      h('option', {value: ''}, '(choose)'), REASONS.map((m) => h('option', {value: m}, m)))),
    h('div.field.wide', h('label', {for: 't-reason'}, 'Reason (why this much error is acceptable)'),
      h('textarea', {id: 't-reason', name: 'reason', rows: 2})),
    h('div.field.actions', h('button', {type: 'submit'}, 'Create new version')), status);
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const d = Object.fromEntries(new FormData(f));
    const tol = {metric: d.metric};
    for (const k of ['max_ulp', 'atol', 'rtol', 'c']) if (d[k] !== '') tol[k] = Number(d[k]);
    if (d.growth) tol.growth = d.growth;
    if (d.reason_code) tol.reason_code = d.reason_code;
    if (d.reason) tol.reason = d.reason;
    const r = await writeAction('Set a tolerance', () =>
      post('/tolerances', {op: d.op, dtype: d.dtype, mode: d.mode || '*', tolerance: tol}), status);
    if (r) go(href('/tolerances', {op: d.op, dtype: d.dtype}));
  });
  return f;
}

export async function renderTolerances(ctx) {
  document.title = 'Tolerances · numval';
  const {main, query} = ctx;
  const body = await optional('/tolerances' + qs({op: query.op, dtype: query.dtype}));
  const rows = listOf(body, 'tolerances');
  const obsBox = h('div', h('p.muted', 'Computing headroom from recent jobs…'));
  const tableBox = h('div');
  const histBox = h('div');
  const filter = h('form.filters', {role: 'search'},
    h('div.field', h('label', {for: 'q-op'}, 'Op'), h('input', {id: 'q-op', name: 'op', value: query.op || ''})),
    h('div.field', h('label', {for: 'q-dtype'}, 'Dtype'), h('input', {id: 'q-dtype', name: 'dtype', value: query.dtype || ''})),
    h('div.field.actions', h('button', {type: 'submit'}, 'Show')));
  filter.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = href('/tolerances', Object.fromEntries(new FormData(filter)));
  });

  function draw(obs) {
    if (body === null) { tableBox.replaceChildren(empty('This server has no tolerance store yet.')); return; }
    if (!rows.length) { tableBox.replaceChildren(empty('No stored tolerances: jobs use the shipped defaults.')); return; }
    tableBox.replaceChildren(h('div.table-wrap', h('table.data', {id: 'tol-current'},
      h('thead', h('tr', ['Op', 'Dtype', 'Pattern', 'Version', 'Allowed', 'Reason', 'Used of allowed (recent)', 'Set', 'History']
        .map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', rows.map((r) => {
        const t = r.tolerance || r;
        return h('tr',
          h('td', r.op), h('td', r.dtype), h('td', h('code', r.mode || r.pattern || '*')),
          h('td', `v${r.version ?? t.version ?? '?'}`), h('td', tolMetric(t)), h('td', tolReason(t)),
          headroomCell(r, obs && obs.groups),
          h('td', when(r.created_at)),
          h('td', h('a', {href: href('/tolerances', {op: r.op, dtype: r.dtype})}, 'history')));
      })))));
  }
  draw(null);

  main.append(h('h1', 'Tolerances'),
    h('p', 'Every tolerance carries a reason and is versioned; a case records the version it was judged by. ',
      'Headroom compares the largest error seen in recent jobs with what is allowed: a tolerance far above what ',
      'is ever observed may have been inflated until a test passed.'),
    filter, section('Current', tableBox), section('Headroom', obsBox));
  if (query.op && query.dtype) {
    main.append(section(`History: ${query.op} / ${query.dtype}`, histBox));
    try {
      const hist = await optional('/tolerances/history' + qs({op: query.op, dtype: query.dtype}));
      const list = listOf(hist, 'tolerances').concat(listOf(hist, 'history'));
      histBox.replaceChildren(list.length ? h('div.table-wrap', h('table.data', {id: 'tol-history'},
        h('thead', h('tr', ['Version', 'Allowed', 'Reason', 'Pattern', 'By', 'When'].map((t) => h('th', {scope: 'col'}, t)))),
        h('tbody', list.map((r) => {
          const t = r.tolerance || r;
          return h('tr', h('td', `v${r.version ?? t.version}`), h('td', tolMetric(t)), h('td', tolReason(t)),
            h('td', h('code', r.mode || r.pattern || '*')), h('td', r.author || r.created_by || '—'),
            h('td', when(r.created_at)));
        })))) : empty('No versions stored for this op and dtype.'));
    } catch (e) { histBox.replaceChildren(errorBox(e)); }
  }
  main.append(section('Set a new version', h('p.muted', 'Needs a token with the admin scope. A new version never edits an old one; loosening without a reason is refused by the server.'), form(query)));

  try {
    const obs = await observed();
    if (!ctx.alive()) return;
    obsBox.replaceChildren(observedTable(obs));
    draw(obs);
  } catch (e) {
    obsBox.replaceChildren(errorBox(e));
  }
}
