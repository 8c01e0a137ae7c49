// RNG job (docs/JOBS.md "RNG jobs"): each check the worker ran on the device's
// generators, one case each, with the figures it judged. Seeding (same seed,
// same stream; seeds S and S+1 share no window), state save and restore (the
// continuation replayed bitwise), parallel streams (no window shared at any
// shift), dropout (masks reproduced, the keep rate's two-sided binomial test)
// and recomputation under activation checkpointing (the backward replays the
// forward's mask). Every figure is in a data table; failed rows are marked.
// Returns null when no case is an RNG case.

import {h, num, section, badge, kv, empty} from '../util.js';

const TITLE = {seeding: 'Seeding', state: 'State save and restore', streams: 'Parallel streams',
  dropout: 'Dropout', recompute: 'Recomputation under activation checkpointing'};
const ORDER = ['seeding', 'state', 'streams', 'dropout', 'recompute'];

export const isRngCase = (c) => !!c && c.op === 'rng' && Array.isArray(c.tests);

// A case's title: its check, and its drop probability where it has one.
export function checkTitle(c) {
  const t = TITLE[c.check] || c.check || 'RNG check';
  return typeof c.p === 'number' ? `${t}, p = ${num(c.p)}` : t;
}

// The cases in the order the worker runs them (seeding, state, streams, then
// dropout and recompute per p), each by its index within a check.
export function rngCases(cases) {
  const rank = (c) => ORDER.indexOf(c.check) < 0 ? ORDER.length : ORDER.indexOf(c.check);
  return (cases || []).filter(isRngCase)
    .sort((a, b) => (a.index ?? 0) - (b.index ?? 0) || rank(a) - rank(b));
}

const detailOf = (t) => (t && t.detail && typeof t.detail === 'object' ? t.detail : {});

// The keep-rate tests (dropout and recompute), with their case.
export function keepRates(cases) {
  return rngCases(cases).flatMap((c) => c.tests.filter((t) => t.name === 'keep_rate' &&
    typeof detailOf(t).kept === 'number').map((t) => ({c, t, d: detailOf(t)})));
}

// The window-overlap tests (seeding, state, streams).
export function overlaps(cases) {
  return rngCases(cases).flatMap((c) => c.tests.filter((t) => typeof detailOf(t).shared_windows === 'number')
    .map((t) => ({c, t, d: detailOf(t)})));
}

// Where two draws first share a window, in words.
export function firstShared(f) {
  if (!f || typeof f !== 'object') return 'none';
  return `${f.a} at ${num(f.at_a)} = ${f.b} at ${num(f.at_b)} (shift ${num(f.shift)})`;
}

// A test's figures in words: bit comparisons, shared windows, the mask scale,
// the keep rate; whatever else its detail holds as key = value.
export function figures(t) {
  const d = detailOf(t);
  const out = [];
  const rest = {...d};
  if (typeof d.differing === 'number') {
    out.push(`${num(d.differing)} differing` + (typeof d.first === 'number'
      ? (d.first < 0 ? '' : `, the first at ${num(d.first)}`) : ''));
    delete rest.differing;
    delete rest.first;
  }
  if (typeof d.shared_windows === 'number') {
    out.push(`${num(d.shared_windows)} shared windows` + (d.first ? `, the first: ${firstShared(d.first)}` : '') +
      `; false-alarm bound ${num(d.false_alarm_bound)}`);
    delete rest.shared_windows;
    delete rest.first;
    delete rest.false_alarm_bound;
  }
  if (typeof d.scale === 'number') {
    out.push(`scale ${num(d.scale)}`);
    delete rest.scale;
  }
  if (typeof d.kept === 'number') {
    out.push(`${num(d.kept)} of ${num(d.n)} kept (expected ${num(d.expected)}), z = ${num(d.z)}, ` +
      `p-value ${num(d.p_value)}, alpha ${num(d.alpha)}`);
    for (const k of ['kept', 'n', 'expected', 'keep_rate', 'z', 'p_value', 'alpha']) delete rest[k];
  }
  for (const [k, v] of Object.entries(rest)) out.push(`${k} = ${typeof v === 'object' ? JSON.stringify(v) : num(v)}`);
  return out.join('; ');
}

// Sentences wrap in their cell (table cells do not wrap by default).
const text = (s) => h('span.reason', s || '—');
const yes = (b) => (b ? 'yes' : h('strong.bad', 'no'));
const cols = (names) => h('thead', h('tr', names.map((t) => h('th', {scope: 'col'}, t))));
const table = (id, caption, head, body) => h('div.table-wrap', h('table.data', {id}, h('caption', caption),
  cols(head), h('tbody', body)));

function summaryTable(cs) {
  return table('rng-checks', 'Each check of the job, one case each (failed ones marked)',
    ['Check', 'Verdict', 'Failure class', 'Tests passed'],
    cs.map((c) => h('tr', {class: c.verdict === 'passed' ? null : 'divergent',
      dataset: {check: c.check, index: String(c.index)}},
    h('th', {scope: 'row'}, checkTitle(c)), h('td', badge(c.verdict)),
    h('td', c.failure_class || '—'),
    h('td.num', `${c.tests.filter((t) => t.passed).length} of ${c.tests.length}`))));
}

function keepRateTable(rows) {
  return table('rng-keep-rate', 'Dropout keep rate: the kept count against Binomial(n, 1 - p), tested two-sided ' +
    'at alpha (a correct generator fails with probability alpha)',
  ['Case', 'Elements', 'Kept', 'Expected', 'Keep rate', '1 - p', 'z', 'p-value', 'alpha', 'Passed'],
  rows.map(({c, t, d}) => h('tr', {class: t.passed ? null : 'divergent', dataset: {index: String(c.index)}},
    h('th', {scope: 'row'}, checkTitle(c)), h('td.num', num(d.n)), h('td.num', num(d.kept)),
    h('td.num', num(d.expected)), h('td.num', num(d.keep_rate)),
    h('td.num', typeof c.p === 'number' ? num(1 - c.p) : '—'), h('td.num', num(d.z)),
    h('td.num', num(d.p_value)), h('td.num', num(d.alpha)), h('td', yes(t.passed)))));
}

function overlapTable(rows) {
  return table('rng-overlap', 'Window overlap: windows of consecutive values shared by draws that must be ' +
    'disjoint, at any shift (the false-alarm bound: the chance a correct generator shares one)',
  ['Case', 'Test', 'Shared windows', 'First shared', 'False-alarm bound', 'Passed'],
  rows.map(({c, t, d}) => h('tr', {class: t.passed ? null : 'divergent',
    dataset: {index: String(c.index), test: t.name}},
  h('th', {scope: 'row'}, checkTitle(c)), h('td', t.name), h('td.num', num(d.shared_windows)),
  h('td', text(firstShared(d.first))), h('td.num', num(d.false_alarm_bound)), h('td', yes(t.passed)))));
}

function caseBlock(c) {
  return h('div.rng-case', {id: `rng-case-${c.index}`, dataset: {check: c.check, index: String(c.index)}},
    h('h3', checkTitle(c)),
    kv([
      ['Verdict', h('span', badge(c.verdict), c.failure_class ? [' ', h('strong.bad.rng-class', c.failure_class)] : null)],
      ['What failed', c.error ? h('span.bad.rng-cause', c.error) : undefined],
      ['Seed', c.seed != null ? String(c.seed) : undefined],
      ['Drop probability p', typeof c.p === 'number' ? num(c.p) : undefined],
      ['Generator state', typeof c.state_bytes === 'number' ? `${num(c.state_bytes)} bytes` : undefined],
    ]),
    table(`rng-tests-${c.index}`, `${checkTitle(c)}: each test, what it found and why it must hold`,
      ['Test', 'Passed', 'Found', 'Figures', 'Why'],
      c.tests.map((t) => h('tr', {class: t.passed ? null : 'divergent', dataset: {test: t.name}},
        h('th', {scope: 'row'}, t.name), h('td', yes(t.passed)), h('td', text(t.message)),
        h('td', text(figures(t))), h('td', text(t.why))))));
}

// The RNG view of a job's cases (or of one case on the case page).
export function rngSection(cases, {title = 'RNG checks'} = {}) {
  const cs = rngCases(cases);
  if (!cs.length) return null;
  const keep = keepRates(cs), ov = overlaps(cs);
  return section(title, h('div', {id: 'rng'},
    cs.length > 1 ? summaryTable(cs) : null,
    ov.length ? overlapTable(ov) : null,
    keep.length ? keepRateTable(keep) : null,
    cs.map(caseBlock),
    cs.every((c) => !c.tests.length) ? empty('No tests: the cases ended before the judgement.') : null));
}
