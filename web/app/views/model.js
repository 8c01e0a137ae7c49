// Model case (docs/MODEL.md "Judgement"): the per-layer error chart (each
// layer output's error against the fp64 reference vs depth, with the band the
// device must stay within and the model-dtype reference's own error), the
// first divergent layer and op linked to its reproducer (the op case's
// artifacts and, once promoted, its suite case), and the logits, tokens and
// accuracy criteria as the worker reported them. Returns null for a case that
// is not a model case.

import {h, num, section, badge, kv, empty} from '../util.js';
import {apiUrl, optional} from '../api.js';
import {svgLineChart} from '../svgchart.js';

// Points of a log chart: an error of 0 has no place on a log axis, so it is a
// gap in the line (the data table below the chart lists every layer).
const logPoint = (v) => (typeof v === 'number' && v > 0 ? v : NaN);

export function layerSeries(layers) {
  const xs = layers.map((_, i) => i);
  return [
    {name: 'device e_dev', points: layers.map((l, i) => [xs[i], logPoint(l.e_dev)])},
    {name: 'model-dtype reference e_dtype_ref', dash: true,
      points: layers.map((l, i) => [xs[i], logPoint(l.e_dtype_ref)])},
    {name: 'band (e_dev must stay below)', points: layers.map((l, i) => [xs[i], logPoint(l.band)]),
      band: layers.map((l, i) => [xs[i], logPoint(Math.min(...layers.map((x) => x.band).filter((b) => b > 0)) / 10),
        logPoint(l.band)])},
  ];
}

function layerChart(layers) {
  return h('div', {id: 'model-layers-chart'}, svgLineChart({series: layerSeries(layers),
    xTicks: layers.map((l, i) => [i, l.name]),
    title: 'Error of each layer output vs depth: the device and the model-dtype reference against the fp64 ' +
      'reference (norm-wise relative), with the band (shaded up to it)',
    xLabel: 'layer (in order)', yLabel: 'relative error (log)', logY: true}));
}

function layerTable(layers, fd) {
  return h('div.table-wrap', h('table.data', {id: 'model-layers'},
    h('caption', 'Per layer, in order (the layer output node)'),
    h('thead', h('tr', ['Layer', 'Output node', 'e_dev', 'e_dtype_ref', 'Band', 'In band'].map((t) =>
      h('th', {scope: 'col'}, t)))),
    h('tbody', layers.map((l) => {
      const first = fd && fd.layer === l.name;
      return h('tr', {class: first ? 'divergent' : null, dataset: {layer: l.name, inBand: String(l.in_band)}},
        h('th', {scope: 'row'}, l.name, first ? h('span.tag.bad', ' first divergent') : null),
        h('td', h('code', l.output)),
        h('td.num', num(l.e_dev)), h('td.num', num(l.e_dtype_ref)), h('td.num', num(l.band)),
        h('td', badge(l.in_band ? 'passed' : 'failed')));
    }))));
}

function artifactA(sha, id, text) {
  return sha ? h('a.button', {id, href: apiUrl(`/artifacts/${encodeURIComponent(sha)}`)}, text) : null;
}

// The first divergent layer and op, and where its reproducer went.
function divergence(c, suiteCase) {
  const fd = c.first_divergent && typeof c.first_divergent === 'object' ? c.first_divergent : null;
  if (!fd) return h('p', {id: 'model-first-divergent'}, 'No layer left its band.');
  const local = fd.local || {};
  const loc = c.localized || null;
  return h('div', {id: 'model-first-divergent'},
    h('p', 'First divergent layer ', h('strong.bad', {id: 'model-fd-layer'}, fd.layer), ', op ',
      h('code', {id: 'model-fd-op'}, fd.op), ' (node ', h('code', {id: 'model-fd-node'}, fd.node), '): e_dev ',
      h('b', num(fd.e_dev)), ' outside the band ', num(fd.band), '.'),
    kv([
      ['The op on the inputs the device gave it', local.verdict
        ? h('span', {id: 'model-fd-local'}, local.verdict.replace(/_/g, ' '), ', max ', num(local.max_ulp), ' ULP, ',
          num(local.mismatches), ' mismatching elements')
        : local.error || undefined],
      ['Reproducer', loc ? h('span', {id: 'model-localized', dataset: {state: loc.state}},
        loc.state === 'op_case' ? `an op case of ${fd.op} alone`
          : loc.state === 'fused_case' ? `a fused case of layer ${fd.layer}`
          : loc.state === 'composition_case' && loc.composition
            ? `a fused composition case of ${num(loc.composition.nodes)} nodes ending at ${fd.node} ` +
              `(e_dev ${num(loc.composition.e_dev)}, band ${num(loc.composition.band)})`
          : 'none', ': ', h('span.muted', loc.reason)) : undefined],
      ['Signature', c.signature ? h('code', {title: c.signature.id}, String(c.signature.id).slice(0, 16)) : undefined],
      ['Gate', c.repro_rate ? `${num(c.repro_rate.failed)} of ${num(c.repro_rate.runs)} runs failed, ` +
        `${num(c.repro_rate.bit_identical)} bit-identical` : undefined],
      ['Suite case', suiteCase ? h('a', {id: 'model-suite-link', href: `#/suite?state=all`,
        title: `suite case ${suiteCase.id}`}, `#${suiteCase.id}: ${suiteCase.kind} ${suiteCase.op} ${suiteCase.dtype}`)
        : undefined],
    ]),
    h('div.actions', artifactA(c.artifact, 'model-artifact-link', `Download the ${fd.op} case`),
      artifactA(c.minimized_artifact, 'model-minimized-link', 'Download its minimized reproducer')));
}

function tokens(d) {
  const row = (name, list, other) => h('tr', h('th', {scope: 'row'}, name),
    ...list.map((t, i) => h('td.num', {class: t !== other[i] ? 'divergent' : null}, String(t))));
  return h('div.table-wrap', h('table.data', {id: 'model-tokens'},
    h('caption', `Greedy decode after a ${d.prompt}-token prompt (differing tokens marked)`),
    h('thead', h('tr', h('th', {scope: 'col'}, 'Step'), ...d.tokens_ref.map((_, i) => h('th', {scope: 'col'}, String(i))))),
    h('tbody', row('fp64 reference', d.tokens_ref, d.tokens_dev), row('device', d.tokens_dev, d.tokens_ref))));
}

function criteria(cr) {
  const l = cr.logits || {}, t = cr.top1 || {}, d = cr.decode, a = cr.accuracy;
  const out = [h('div', {id: 'model-logits'}, kv([
    ['Logits (KL of softmax)', h('span', badge(l.passed ? 'passed' : 'failed'), ' mean KL ', num(l.kl_mean),
      ' (allowed ', num(l.kl_allowed), '; the model-dtype reference ', num(l.kl_mean_dtype_ref), '), max ',
      num(l.kl_max), '; max abs error ', num(l.max_abs), ', max rel ', num(l.max_rel))],
    ['Top-1', h('span', {id: 'model-top1'}, badge(t.passed ? 'passed' : 'failed'), ' agreement ', num(t.agreement),
      ' (the model-dtype reference ', num(t.agreement_dtype_ref), '), ', num(t.flips), ' flips, ',
      num(t.unjustified_flips), ' unjustified; top-5 overlap ', num(t.top5_overlap))],
  ]))];
  if (d) {
    out.push(h('div', {id: 'model-decode'}, kv([
      ['Greedy decode', h('span', badge(d.passed ? 'passed' : 'failed'), ` ${d.steps} tokens: agreement `,
        h('b', {id: 'model-decode-agreement'}, num(d.agreement)), ', first divergent step ',
        h('b', {id: 'model-decode-first'}, d.first_divergent === null ? 'none' : String(d.first_divergent)),
        d.first_divergent === null ? '' : [' (fp64 margin ', num(d.margin_at_divergence), ', allowed ',
          num(d.allowed_margin), ')'])],
    ]), tokens(d)));
  }
  if (a) {
    out.push(h('div', {id: 'model-accuracy'}, kv([
      ['Accuracy gap', h('span', badge(a.passed ? 'passed' : 'failed'), ' ', h('b', {id: 'model-gap'}, num(a.gap)),
        ' in [', num(a.gap_ci[0]), ', ', num(a.gap_ci[1]), '] (max ', num(a.max_gap), ', alpha ', num(a.alpha), ')')],
      ['Accuracy', `fp64 ${num(a.acc_ref)} [${num(a.acc_ref_ci[0])}, ${num(a.acc_ref_ci[1])}], device ` +
        `${num(a.acc_dev)} [${num(a.acc_dev_ci[0])}, ${num(a.acc_dev_ci[1])}] on ${num(a.n)} samples (${a.labels})`],
    ])));
  }
  return out;
}

// The suite case promoted from the case's signature, or null (none, or no suite).
export async function suiteCaseOf(c) {
  const sig = c && c.op === 'model' && c.signature && c.signature.id;
  if (!sig) return null;
  const r = await optional('/suite').catch(() => null);
  return ((r && r.suite) || []).find((x) => x.signature === sig) || null;
}

export function modelSection(c, {suiteCase = null, caseHref = null} = {}) {
  if (c.op !== 'model' || !Array.isArray(c.layers) || !c.layers.length) return null;
  const fd = c.first_divergent && typeof c.first_divergent === 'object' ? c.first_divergent : null;
  const g = c.growth || {};
  return section('Model', h('div', {id: 'model', dataset: {case: String(c.id ?? '')}},
    caseHref ? h('p', 'Case ', h('a', {id: 'model-case-link', href: caseHref}, `${c.dtype}, sample ${c.sample}`),
      ' ', badge(c.verdict)) : null,
    divergence(c, suiteCase),
    layerChart(c.layers),
    h('p.muted', 'Growth across depth: e_dev ', num(g.e_dev_first), ' → ', num(g.e_dev_last),
      ', the model-dtype reference ', num(g.e_dtype_ref_first), ' → ', num(g.e_dtype_ref_last),
      `; accumulator ${c.accumulator || '?'}, band factor ${num(c.band_factor)}. An error of 0 is a gap on the log axis.`),
    layerTable(c.layers, fd),
    c.criteria ? criteria(c.criteria) : empty('No criteria: the case ended before the judgement.')));
}
