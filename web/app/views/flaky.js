// Flaky cases: failures whose reproduction gate failed in fewer than half of its
// runs (docs/ARTIFACTS.md "Reproduction gate and minimization"), so they were
// neither minimized nor promoted into the suite. GET /api/v1/flaky?limit=N ->
// {"flaky": [{"case_id", "job_id", "op", "dtype", "shape", "input", "layout",
// "device", "signature", "repro_rate": {"runs", "failed", "bit_identical"}, "rate",
// "created_at"}]}.

import {h, num, when, empty, shortId, qs} from '../util.js';
import {getJson, ApiError} from '../api.js';
import {href} from '../router.js';

// The share of gate runs that failed, 0..1: "rate" as sent (a percentage when over
// 1), else failed / runs; null when neither is known.
export function flakyRate(f) {
  if (typeof f.rate === 'number' && Number.isFinite(f.rate)) return f.rate > 1 ? f.rate / 100 : f.rate;
  const rr = f.repro_rate || {};
  return rr.runs > 0 && Number.isFinite(rr.failed) ? rr.failed / rr.runs : null;
}

export function rateText(f) {
  const r = flakyRate(f);
  const rr = f.repro_rate || {};
  const pct = r === null ? '—' : `${Math.round(r * 1000) / 10}%`;
  return rr.runs != null ? `${pct} (${num(rr.failed)} of ${num(rr.runs)} runs failed)` : pct;
}

function testText(f) {
  const shape = Array.isArray(f.shape) ? `[${f.shape.join('×')}]` : f.shape;
  return [f.op, f.dtype, shape, f.layout, f.input].filter((x) => x !== undefined && x !== null && x !== '').join(' · ');
}

function sigCell(sig) {
  const id = sig && typeof sig === 'object' ? sig.id : sig;
  if (!id) return h('td', '—');
  return h('td', h('code', {title: String(id)}, shortId(id, 12)));
}

function historyLink(f) {
  if (!f.op || !f.dtype) return '—';
  return h('a', {href: href('/history', {op: f.op, dtype: f.dtype,
    shape: Array.isArray(f.shape) ? JSON.stringify(f.shape) : f.shape, layout: f.layout, input: f.input,
    device: f.device})}, 'history');
}

export async function renderFlaky(ctx) {
  document.title = 'Flaky cases · numval';
  const {main, query} = ctx;
  const limit = Number(query.limit) > 0 ? Number(query.limit) : 100;
  main.append(h('h1', 'Flaky cases'),
    h('p.muted', 'Failures that did not reproduce reliably: the worker re-ran each failed case (its reproduction ' +
      'gate) and fewer than half of the runs failed the same way, so the case was not minimized or promoted ' +
      'into the suite. Rate: the share of gate runs that failed; bit-identical: runs whose outputs were the same bits.'));
  let body;
  try {
    body = await getJson('/flaky' + qs({limit}));
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    main.append(h('div.error', {id: 'flaky-error', role: 'alert'}, e.status === 404
      ? `No flaky-case list from this server: GET /api/v1/flaky answered 404 (${e.message}).`
      : `The server refused the flaky-case list: ${e.status} ${e.message}`));
    return;
  }
  const list = Array.isArray(body && body.flaky) ? body.flaky : [];
  if (!list.length) {
    main.append(empty('No flaky cases.'));
    return;
  }
  main.append(h('div.table-wrap', h('table.data', {id: 'flaky'},
    h('caption', `${list.length} flaky case${list.length === 1 ? '' : 's'}, newest first` +
      (list.length >= limit ? ` (the first ${limit})` : '')),
    h('thead', h('tr', ['Case', 'Job', 'Test (op · dtype · shape · layout · input)', 'Device', 'Failed runs',
      'Bit-identical runs', 'Signature', 'When', 'History'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((f) => {
      const rr = f.repro_rate || {};
      return h('tr', {dataset: {case: f.case_id ?? ''}},
        h('td', f.case_id != null ? h('a', {href: `#/cases/${encodeURIComponent(f.case_id)}`}, `case ${f.case_id}`) : '—'),
        h('td', f.job_id != null ? h('a', {href: `#/jobs/${encodeURIComponent(f.job_id)}`}, `#${f.job_id}`) : '—'),
        h('td', testText(f) || '—'),
        h('td', f.device ? h('a', {href: `#/devices?name=${encodeURIComponent(f.device)}`}, f.device) : '—'),
        h('td.num.rate', rateText(f)),
        h('td.num', rr.bit_identical != null ? `${num(rr.bit_identical)} of ${num(rr.runs)}` : '—'),
        sigCell(f.signature),
        h('td', when(f.created_at)),
        h('td', historyLink(f)));
    })))));
}
