// Serving case (docs/SERVING.md "The checks"): the job's one check as the worker
// judged it. prefill_decode and long_context: error against the fp64 reference
// and the band as functions of the position, and top-1 agreement per position;
// batch: which batch composition changed what; sustained and paged: per request;
// sampling (when the case carries it): the device's token counts against the
// reference distribution's expected counts, with the G-test. Every chart has its
// data in a table. Returns null for a case that is not a serving case.

import {h, num, section, badge, kv, empty} from '../util.js';
import {svgLineChart} from '../svgchart.js';
import {samplingBlock, samplingOf} from './serving-sampling.js';

export {samplingOf};

const logPoint = (v) => (typeof v === 'number' && v > 0 ? v : NaN);
const yes = (b) => (b ? 'yes' : h('strong.bad', 'no'));
const CHECKS = ['prefill_decode', 'long_context', 'batch', 'sustained', 'paged', 'sampling'];

// The check's criterion object (the case's "check" names it), or null.
export function criterionOf(c) {
  const cr = c && c.criteria && typeof c.criteria === 'object' ? c.criteria : null;
  if (!cr) return null;
  const name = CHECKS.includes(c.check) && cr[c.check] ? c.check : CHECKS.find((k) => cr[k]);
  return name ? {name, crit: cr[name]} : null;
}

export function prefillSeries(pd) {
  const pp = pd.per_position || [];
  return [
    {name: 'd(t): decode vs prefill', points: pp.map((p) => [p.position, logPoint(p.d)])},
    {name: 'allowed 2 band(t)', dash: true, points: pp.map((p) => [p.position, logPoint(p.allowed)])},
    {name: 'prefill error vs fp64', points: pp.map((p) => [p.position, logPoint(p.e_prefill)])},
    {name: 'decode error vs fp64', points: pp.map((p) => [p.position, logPoint(p.e_decode)])},
  ];
}

export function longSeries(lc) {
  const pts = lc.points || [];
  return [
    {name: 'device e_dev', points: pts.map((p) => [p.position, logPoint(p.e_dev)])},
    {name: 'model-dtype reference e_dtype_ref', dash: true, points: pts.map((p) => [p.position, logPoint(p.e_dtype_ref)])},
    {name: 'band(t) (e_dev must stay below)', points: pts.map((p) => [p.position, logPoint(p.band)])},
  ];
}

// Top-1 agreement as a function of the position: 1 or 0 per position
// (prefill_decode), or the window's fraction at each reported point (long_context).
export function agreementSeries(name, crit) {
  if (name === 'prefill_decode') {
    const pp = crit.per_position || [];
    return [{name: 'decode top-1 = prefill top-1 (1 yes, 0 no)',
      points: pp.map((p) => [p.position, p.same_top1 ? 1 : 0]),
      marks: pp.filter((p) => !p.same_top1).map((p) => [p.position, 0, `position ${p.position}: top-1 differs`])}];
  }
  return [{name: 'top-1 agreement with fp64 over the window ending here',
    points: (crit.points || []).map((p) => [p.position, p.agreement])}];
}

// Error charts on a log axis (an error of 0 is a gap there; the table lists it),
// agreement charts over 0..1.
function chart(id, series, title, yLabel, logY) {
  return h('div', {id}, svgLineChart({series, title: logY ? `${title}. An error of 0 is a gap on the log axis.` : title,
    xLabel: 'position', yLabel, logY, yRange: logY ? undefined : [0, 1]}));
}

function prefill(pd) {
  const pp = pd.per_position || [];
  const out = pp.find((p) => !p.within);
  return [
    kv([
      ['Positions', num(pd.positions)],
      ['Worst d / allowed', h('span', {id: 'serving-worst'}, num(pd.worst_ratio), ' at position ', num(pd.worst_position))],
      ['First position out of band', h('b', {id: 'serving-first-out'}, out ? String(out.position) : 'none')],
    ]),
    chart('serving-error-chart', prefillSeries(pd),
      'Per position: distance between the cached decode and the prefill (relative to the fp64 reference), the ' +
      'allowed 2 band(t), and each path\'s own error against fp64', 'relative error (log)', true),
    chart('serving-agreement-chart', agreementSeries('prefill_decode', pd),
      'Per position: whether the cached decode\'s top-1 token equals the prefill\'s', 'top-1 agreement', false),
    h('div.table-wrap', h('table.data', {id: 'serving-positions'},
      h('caption', 'Per position: prefill vs decode through the KV cache (positions out of band marked)'),
      h('thead', h('tr', ['Position', 'd', 'Allowed', 'Prefill error', 'Decode error', 'e_dtype_ref', 'Within',
        'Same top-1'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', pp.map((p) => h('tr', {class: p.within ? null : 'divergent', dataset: {position: p.position}},
        h('th', {scope: 'row'}, String(p.position)), h('td.num', num(p.d)), h('td.num', num(p.allowed)),
        h('td.num', num(p.e_prefill)), h('td.num', num(p.e_decode)), h('td.num', num(p.e_dtype_ref)),
        h('td', yes(p.within)), h('td', yes(p.same_top1)))))))];
}

function longContext(lc) {
  const s = lc.seconds || {};
  const at = (v) => (v === null || v === undefined ? 'none' : String(v));
  return [
    kv([
      ['Context', `${num(lc.context)} positions, a point every ${num(lc.every)}`],
      ['Top-1 agreement', h('b', {id: 'serving-agreement'}, num(lc.agreement))],
      ['Worst e_dev / band', h('span', {id: 'serving-worst'}, num(lc.worst_ratio), ' at position ', num(lc.worst_position))],
      ['First position out of band', h('b', {id: 'serving-first-out'}, at(lc.first_out_of_band))],
      ['First unjustified top-1 flip', h('b', {id: 'serving-first-flip'}, at(lc.first_unjustified_flip))],
      ['Growth slope of e_dev (log-log, reported, not judged)', num(lc.growth_slope)],
      ['Wall time', `device ${num(s.device)} s, fp64 reference ${num(s.fp64_reference)} s, model-dtype reference ` +
        `${num(s.dtype_reference)} s`],
    ]),
    chart('serving-error-chart', longSeries(lc),
      'Error against the fp64 reference vs position through the KV cache: the device, the model-dtype reference, ' +
      'and the band that grows with the attention\'s length', 'relative error (log)', true),
    chart('serving-agreement-chart', agreementSeries('long_context', lc),
      'Top-1 agreement with the fp64 reference over each window of positions', 'top-1 agreement', false),
    h('div.table-wrap', h('table.data', {id: 'serving-points'},
      h('caption', `Every ${lc.every} positions (points out of band marked)`),
      h('thead', h('tr', ['Position', 'e_dev', 'e_dtype_ref', 'Band', 'e_dev / band', 'Window agreement']
        .map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', (lc.points || []).map((p) => h('tr', {class: p.e_dev <= p.band ? null : 'divergent',
        dataset: {position: p.position}},
      h('th', {scope: 'row'}, String(p.position)), h('td.num', num(p.e_dev)), h('td.num', num(p.e_dtype_ref)),
      h('td.num', num(p.band)), h('td.num', typeof p.e_dev === 'number' && p.band > 0 ? num(p.e_dev / p.band) : '—'),
      h('td.num', num(p.agreement)))))))];
}

// Which batch composition changed what (docs/SERVING.md "batch").
function batch(b) {
  const rows = b.compositions || [];
  return [
    h('p', `The request decoded greedily for ${num(b.steps)} steps alone, then inside each batch below; `,
      'judged bit for bit (padded only where the device declares a sequential reduction order).'),
    h('div.table-wrap', h('table.data', {id: 'serving-batch'},
      h('caption', 'Batch invariance: per composition, what changed against the request alone (changed ones marked)'),
      h('thead', h('tr', ['Requests', 'Prompt lengths', 'Layout', 'Judged', 'Values differing', 'First differing step',
        'Greedy tokens equal', 'Max relative difference', 'Verdict'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', rows.map((r) => h('tr', {class: r.values_differing ? 'divergent' : null,
        dataset: {requests: r.requests, layout: r.layout, passed: String(r.passed)}},
      h('th', {scope: 'row'}, String(r.requests)), h('td', (r.prompt_lengths || []).join(', ')), h('td', r.layout),
      h('td', r.judged ? 'yes' : 'reported'), h('td.num', num(r.values_differing)),
      h('td.num', r.first_differing_step === null ? 'none' : num(r.first_differing_step)),
      h('td.num', `${num(r.tokens_equal)} of ${num(b.steps)}`), h('td.num', num(r.max_rel_diff)),
      h('td', badge(r.passed ? 'passed' : 'failed')))))))];
}

function requestTable(id, caption, cols, rows, cells) {
  return h('div.table-wrap', h('table.data', {id},
    h('caption', caption),
    h('thead', h('tr', cols.map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', rows.map((q) => h('tr', {class: q.values_differing ? 'divergent' : null,
      dataset: {request: q.request}}, h('th', {scope: 'row'}, String(q.request)), ...cells(q))))));
}

const firstTok = (q) => h('td.num', q.first_differing_token === null ? 'none' : num(q.first_differing_token));

function sustained(sb) {
  const rows = sb.per_request || [];
  const bad = rows.filter((q) => q.values_differing).length;
  return [
    h('p', {id: 'serving-sustained-summary'}, `${num(sb.requests)} requests on a seeded arrival schedule; `,
      bad ? h('strong.bad', `${bad} differ from their solo run`) : 'every one equal to its solo run, bit for bit', '.'),
    requestTable('serving-requests', 'Sustained batching: per request, against its solo run (differing ones marked)',
      ['Request', 'Arrives at step', 'Prompt', 'Generates', 'Values differing', 'Greedy tokens equal',
        'First differing token'], rows,
      (q) => [h('td.num', num(q.arrives)), h('td.num', num(q.prompt)), h('td.num', num(q.generates)),
        h('td.num', num(q.values_differing)), h('td.num', `${num(q.tokens_equal)} of ${num(q.generates)}`), firstTok(q)])];
}

// How the paged check judged (its "rule"; cases stored before it had one: "judged").
function pagedRule(pg) {
  if (pg.rule === 'bits') return 'bit for bit (the device declares a sequential reduction order and no nondeterministic op)';
  if (pg.rule === 'band') {
    return 'within 2 band(t) of the run without eviction from each request\'s first recomputation on '
      + '(every token where the device declares nondeterministic ops), the other tokens bit for bit';
  }
  return pg.judged ? 'bit for bit (the device declares itself deterministic)'
    : 'reported, not judged (the device declares nondeterministic ops)';
}

// Where the first token out of its rule lies: request, token, schedule step, position, page.
function pagedFailure(f, page) {
  if (!f) return undefined;
  const how = f.recomputed ? 'computed by a recomputation' : 'a decode step';
  const by = f.rule === 'band' ? `d ${num(f.d)} > allowed ${num(f.allowed)}` : `${num(f.values_differing)} values differ (bit for bit)`;
  return h('span.bad', {id: 'serving-first-failure'},
    `request ${num(f.request)}, token ${num(f.token)}, schedule step ${num(f.schedule_step)}, `
    + `position ${num(f.position)} in page ${num(f.page)} of ${num(page)} positions; ${how}; ${by}`);
}

function paged(pg) {
  return [
    kv([
      ['Page budget', h('span', {id: 'serving-pages'}, `${num(pg.pages)} pages of ${num(pg.page)} positions`)],
      ['Evictions', h('b', {id: 'serving-evictions'}, num(pg.evictions))],
      ['Judged', h('span', {id: 'serving-paged-rule'}, pagedRule(pg))],
      ['Worst d / allowed (band)', typeof pg.worst_ratio === 'number' ? num(pg.worst_ratio) : undefined],
      ['First failure', pagedFailure(pg.first_failure, pg.page)],
    ]),
    requestTable('serving-requests', 'Paged KV cache: per request, against the run with pages for all (differing ones marked)',
      ['Request', 'Prompt', 'Evictions', 'Recomputations', 'Values differing', 'First differing token'],
      pg.per_request || [],
      (q) => [h('td.num', num(q.prompt)), h('td.num', num(q.evictions)), h('td.num', num(q.recomputations)),
        h('td.num', num(q.values_differing)), firstTok(q)])];
}

// What a failed case's reproducer is (docs/SERVING.md "Artifacts"), and who
// took its greedy tokens ("Greedy tokens"); null when the case does not say.
const LOCALIZED = {serving_pair: 'a serving pair (the node\'s op alone and in the batch)',
  op_case: 'an op case of the first op that fails its tolerance'};
export function reproducerText(c) {
  const loc = c && c.localized && typeof c.localized === 'object' ? c.localized : null;
  return loc ? `${LOCALIZED[loc.state] || 'none'}: ${loc.reason || ''}` : null;
}
export function greedyText(c) {
  return c && c.argmax === 'device' ? 'the device\'s argmax op'
    : c && c.argmax === 'kind' ? 'the argmax of the device\'s logits (the backend does not offer the op)' : null;
}

const BODY = {prefill_decode: prefill, long_context: longContext, batch, sustained, paged};
const TITLE = {prefill_decode: 'Prefill vs decode', long_context: 'Long context', batch: 'Batch invariance',
  sustained: 'Sustained batching', paged: 'Paged KV cache', sampling: 'Repeated sampling'};

export function servingSection(c, {caseHref = null} = {}) {
  if (!c || c.op !== 'serving') return null;
  const cr = criterionOf(c);
  const smp = samplingOf(c);
  const rule = cr ? cr.crit : null;
  const crit = cr && cr.name !== 'sampling' ? cr.crit : null;
  return section('Serving', h('div', {id: 'serving', dataset: {case: String(c.id ?? ''), check: c.check || ''}},
    caseHref ? h('p', 'Case ', h('a', {id: 'serving-case-link', href: caseHref}, `${c.dtype}, sample ${c.sample}`),
      ' ', badge(c.verdict)) : null,
    h('h3', {id: 'serving-check'}, TITLE[c.check] || c.check || 'Serving check'),
    kv([
      ['Verdict', h('span', badge(c.verdict), c.failure_class ? [' ', h('strong.bad', {id: 'serving-class'}, c.failure_class)] : null)],
      ['What changed', c.error ? h('span.bad', {id: 'serving-cause'}, c.error) : undefined],
      ['Accumulator (declared)', c.accumulator],
      ['Tolerance', rule && rule.tolerance ? h('span.rule-text', {id: 'serving-tolerance'}, rule.tolerance) : undefined],
      ['Why', rule && rule.reason ? h('span.rule-text', rule.reason) : undefined],
      ['Greedy tokens', greedyText(c) || undefined],
      ['Reproducer', c.localized ? h('span', {id: 'serving-localized', dataset: {state: c.localized.state}},
        reproducerText(c)) : undefined],
    ]),
    crit && BODY[cr.name] ? BODY[cr.name](crit) : null,
    smp ? samplingBlock(smp) : null,
    !crit && !smp ? empty('No criteria: the case ended before the judgement.') : null));
}
