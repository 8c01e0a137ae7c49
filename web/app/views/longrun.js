// Long-run job (worker/kinds/longrun/, docs/JOBS.md "Long-run jobs"): a
// long-run job has no cases, its result sits on the job ("result"). Shown: the
// verdict with its failure class, reason and seeds; each acceptance rule with its
// numbers (Welch's t-test and trimmed means of the final eval losses, the
// per-step envelope, determinism); the AMP policy version; the eval-loss curves
// of every seed, device vs the reference band, as inline SVG; the gradient
// scaler's record (loss scale per step with the skipped steps marked, gradient
// norms, non-finite elements, low-precision gradient zeros). Returns null for a
// result without curves.

import {h, num, section, kv, badge, when} from '../util.js';
import {optional} from '../api.js';
import {svgLineChart} from '../svgchart.js';
import {zstdDecompress, base64Bytes} from '../zstd.js';

const finite = (y) => typeof y === 'number' && Number.isFinite(y);

// A quantity per logged step: the reference runs as a mean line over their
// min..max band, each device run as its own dashed line. With a margin, the band
// widened by margin*|bound| (the acceptance envelope, docs/JOBS.md rule 3) is
// the series' "outer" range.
// runs: [{seed, points: [[step, value]...]}...]
export function bandSeries(ref, dev, what, margin) {
  const at = new Map();
  for (const run of ref) {
    for (const [x, y] of run.points || []) {
      if (!finite(y)) continue;
      if (!at.has(x)) at.set(x, []);
      at.get(x).push(y);
    }
  }
  const steps = [...at.keys()].sort((a, b) => a - b);
  const band = steps.map((x) => [x, Math.min(...at.get(x)), Math.max(...at.get(x))]);
  const mean = steps.map((x) => [x, at.get(x).reduce((a, b) => a + b, 0) / at.get(x).length]);
  const series = [];
  if (ref.length) {
    const sr = {name: `${what}: mean, band = min..max over ${ref.length} seeds`, points: mean, band};
    if (finite(margin) && margin > 0) {
      sr.outer = band.map(([x, lo, hi]) => [x, lo - margin * Math.abs(lo), hi + margin * Math.abs(hi)]);
      sr.name += `; dotted: envelope ±${num(margin)}×|bound|`;
    }
    series.push(sr);
  }
  for (const run of dev) {
    series.push({name: `device seed ${run.seed}`, points: (run.points || [])
      .map(([x, y]) => [x, typeof y === 'number' ? y : NaN]), dash: true});
  }
  return series;
}

// curves = {reference: [{seed, points: [[step, loss]...]}...], device: [...]}.
export function lossSeries(curves, margin) {
  const ref = Array.isArray(curves.reference) ? curves.reference : [];
  const dev = Array.isArray(curves.device) ? curves.device : [];
  return bandSeries(ref, dev, 'reference', margin);
}

// The per-step record (jsonl, one line per run and logged step) grouped into
// runs: {reference: [{seed, recs: [...]}], device: [...]}, in seed order.
export function seriesRuns(text) {
  const by = {reference: new Map(), device: new Map()};
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const r = JSON.parse(line);
    const m = by[r.run];
    if (!m) continue;
    if (!m.has(r.seed)) m.set(r.seed, {seed: r.seed, recs: []});
    m.get(r.seed).recs.push(r);
  }
  const list = (m) => [...m.values()].sort((a, b) => a.seed - b.seed);
  return {reference: list(by.reference), device: list(by.device)};
}

// Loss scale per device run, with the logged steps the scaler skipped marked.
export function scaleSeries(devRuns) {
  return devRuns.map((r) => ({name: `device seed ${r.seed}`,
    points: r.recs.map((x) => [x.step, x.scale]),
    marks: r.recs.filter((x) => x.skipped).map((x) => [x.step, x.scale,
      `seed ${r.seed}, step ${x.step}: skipped (${num(x.nonfinite)} non-finite gradient elements), scale ${num(x.scale)}`])}));
}

// Mean per-layer gradient norm at the last logged step: {layers, reference, device: [{seed, norms}]}.
export function layerNorms(runs) {
  const last = (r) => r.recs[r.recs.length - 1] || {};
  const layers = [...new Set([...runs.reference, ...runs.device]
    .flatMap((r) => Object.keys(last(r).layer_grad_norms || {})))];
  const ref = layers.map((l) => {
    const v = runs.reference.map((r) => (last(r).layer_grad_norms || {})[l]).filter(finite);
    return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
  });
  const device = runs.device.map((r) => ({seed: r.seed, step: last(r).step,
    norms: layers.map((l) => (last(r).layer_grad_norms || {})[l])}));
  return {layers, reference: ref, device};
}

function layerTable(runs) {
  const ln = layerNorms(runs);
  if (!ln.layers.length) return null;
  return h('div.table-wrap', h('table.data', {id: 'longrun-layers'},
    h('caption', 'Gradient norm per layer at the last logged step (unscaled)'),
    h('thead', h('tr', h('th', {scope: 'col'}, 'Layer'), h('th', {scope: 'col'}, 'Reference (mean over seeds)'),
      ln.device.map((d) => h('th', {scope: 'col'}, `Device seed ${d.seed}`)))),
    h('tbody', ln.layers.map((l, i) => h('tr', h('th', {scope: 'row'}, l), h('td.num', num(ln.reference[i])),
      ln.device.map((d) => h('td.num', num(d.norms[i]))))))));
}

function seriesSection(res) {
  const sr = res.series;
  if (!sr || !sr.data) return null;
  let runs;
  try {
    if (sr.encoding !== 'zstd+base64') throw new Error(`unknown encoding "${sr.encoding}"`);
    runs = seriesRuns(new TextDecoder().decode(zstdDecompress(base64Bytes(sr.data))));
  } catch (e) {
    return h('p.error', {role: 'alert'}, `The per-step record could not be read: ${e.message}`);
  }
  const pick = (list, key) => list.map((r) => ({seed: r.seed, points: r.recs.map((x) => [x.step, x[key]])}));
  const n = runs.reference.concat(runs.device).reduce((a, r) => a + r.recs.length, 0);
  const skipped = runs.device.map((r) => ({seed: r.seed, steps: r.recs.filter((x) => x.skipped).map((x) => x.step)}));
  const gs = res.grad_scaler || {};
  return h('div', {id: 'longrun-series'},
    h('h3', 'Per-step record'),
    h('p.muted', {id: 'longrun-series-info'}, `Per-step record: ${n} logged steps over ${runs.reference.length} ` +
      `reference and ${runs.device.length} device runs (${num(sr.raw_bytes)} bytes of jsonl, ${num(sr.compressed_bytes)} ` +
      'stored zstd+base64 in the job result).'),
    h('div', {id: 'longrun-gradnorm'}, svgLineChart({series: bandSeries(pick(runs.reference, 'grad_norm'),
      pick(runs.device, 'grad_norm'), 'reference'), title: 'Global gradient norm (unscaled) per logged step',
    xLabel: 'step', yLabel: 'gradient norm (log)', logY: true})),
    layerTable(runs),
    h('div', {id: 'longrun-scale'}, svgLineChart({series: scaleSeries(runs.device),
      title: `Loss scale of the dynamic gradient scaler per logged step, device runs (× marks a skipped step; ` +
        `${gs.enabled ? 'the fp64 reference trains unscaled' : 'scaler off: the scale stays 1'})`,
      xLabel: 'step', yLabel: 'loss scale (log)', logY: true})),
    h('p', {id: 'longrun-skipped-steps'}, 'Skipped among the logged steps: ', skipped.map((x, i) =>
      [i ? '; ' : '', `seed ${x.seed}: `, x.steps.length ? x.steps.join(', ') : 'none'])));
}

function ruleText(r) { return r && r.rule ? h('div.muted.rule-text', r.rule) : null; }

function passed(v) { return v === undefined ? '—' : badge(v ? 'passed' : 'failed'); }

// "yes" / "no" / "not checked" for determinism.bit_identical.
export function bitIdentical(det) {
  if (!det || typeof det.bit_identical !== 'boolean') return 'not checked';
  return det.bit_identical ? 'yes' : 'no';
}

// The device's gradient per layer and its own eval loss at the weights its run
// holds (docs/JOBS.md rule 5): each error against the declared-precision
// reference's, with the first step beyond the allowance when one failed.
function matchedRow(m) {
  const ev = m.eval_loss || {};
  const ratio = (d, c) => (typeof d === 'number' && typeof c === 'number' && c > 0 ? ` (${num(d / c)}×)` : '');
  return h('tr', {dataset: {rule: 'matched_weights'}}, h('th', {scope: 'row'}, 'At matched weights'),
    h('td', `${num(m.checked_steps)} checked steps; allowed: ${num(m.ratio)} × the declared-precision ` +
      `reference's error + floor ${num(m.floor)}`,
    h('ul', (m.gradient || []).map((L) => h('li', {dataset: {layer: L.layer, passed: String(L.passed)}},
      `gradient ${L.layer}: ${num(L.device_error)} vs declared ${num(L.declared_error)}${ratio(L.device_error, L.declared_error)}, ` +
      `allowed ${num(L.allowed)}`, L.first_beyond ? `; first beyond at step ${L.first_beyond.step}, seed ${L.first_beyond.seed}` : '')).concat(
      h('li', {dataset: {layer: 'eval_loss', passed: String(ev.passed)}},
        `eval loss: ${num(ev.device_error)} vs declared ${num(ev.declared_error)}${ratio(ev.device_error, ev.declared_error)}, allowed ${num(ev.allowed)}`))),
    ruleText(m)),
    h('td', passed(m.passed)));
}

function rulesTable(acc) {
  const fin = acc.final_loss || {}, w = fin.welch || {}, t = fin.trimmed_mean || {};
  const env = acc.envelope || {}, det = acc.determinism || {};
  const gap = typeof t.device === 'number' && typeof t.reference === 'number' ? t.device - t.reference : null;
  return h('div.table-wrap', h('table.data', {id: 'longrun-rules'},
    h('caption', 'Acceptance rules and their numbers'),
    h('thead', h('tr', ['Rule', 'Numbers', 'Result'].map((x) => h('th', {scope: 'col'}, x)))),
    h('tbody',
      h('tr', {dataset: {rule: 'welch'}}, h('th', {scope: 'row'}, 'Welch t-test, final losses'),
        h('td', `t = ${num(w.t)}, df = ${num(w.df)}, p = ${num(w.p)}, alpha = ${num(w.alpha)}`, ruleText(w)), h('td', passed(w.passed))),
      h('tr', {dataset: {rule: 'trimmed_mean'}}, h('th', {scope: 'row'}, 'Trimmed-mean band'),
        h('td', `reference ${num(t.reference)}, device ${num(t.device)}, gap ${num(gap)}, band ${num(t.band)} ` +
          `(band_k ${num(t.band_k)} × sd ${num(t.sd_reference)}, floor ${num(t.band_floor)} × reference; trim ${num(t.trim)})`,
          ruleText(t)),
        h('td', passed(t.passed))),
      h('tr', {dataset: {rule: 'envelope'}}, h('th', {scope: 'row'}, 'Per-step envelope'),
        h('td', `margin ${num(env.margin)}, ${num(env.violations)} violation(s)`,
          (env.first_violations || []).length ? h('ul', env.first_violations.map((v) =>
            h('li', `step ${v.step}, seed ${v.seed}: ${num(v.loss)} outside [${num(v.low)}, ${num(v.high)}]`))) : null,
          ruleText(env)),
        h('td', passed(env.passed))),
      acc.matched_weights ? matchedRow(acc.matched_weights) : null,
      h('tr', {dataset: {rule: 'determinism'}}, h('th', {scope: 'row'}, 'Determinism'),
        h('td', det.seed !== undefined ? `seed ${det.seed} repeated: bit-identical ${bitIdentical(det)}` : 'not checked',
          ruleText(det)),
        h('td', det.bit_identical === undefined ? 'not checked' : passed(det.bit_identical))),
      fin.drift ? driftRow(fin.drift) : null)));
}

// Drift, paired by seed: reported with the rules, never judged.
export function driftText(d) {
  const dir = d.mean_gap > 0 ? 'worse' : d.mean_gap < 0 ? 'better' : 'equal';
  const k = d.mean_gap > 0 ? d.device_worse : d.device_better;
  return `mean device − reference ${num(d.mean_gap)} (sd ${num(d.sd)}), t = ${num(d.t)}, p = ${num(d.p)}; ` +
    `device ${dir} on ${num(k)} of ${num(d.of)} seeds; ${num(100 * d.fraction_of_band)}% of the band`;
}

function driftRow(d) {
  return h('tr', {dataset: {rule: 'drift'}}, h('th', {scope: 'row'}, 'Drift (paired by seed)'),
    h('td', driftText(d), ruleText(d)),
    h('td', d.significant ? h('span', {title: 'significant at alpha; not a verdict'}, 'drift (reported)') : 'none'));
}

function finals(acc) {
  const fin = acc.final_loss || {}, seeds = acc.seeds || [];
  const rf = fin.reference_final || [], df = fin.device_final || [];
  if (!rf.length && !df.length) return null;
  return h('div.table-wrap', h('table.data', {id: 'longrun-finals'},
    h('caption', 'Final eval loss per seed'),
    h('thead', h('tr', ['Seed', 'Reference (fp64)', 'Device', 'Device − reference'].map((x) => h('th', {scope: 'col'}, x)))),
    h('tbody', rf.map((r, i) => h('tr', h('td', String(seeds[i] ?? i)), h('td.num', num(r)), h('td.num', num(df[i])),
      h('td.num', finite(r) && finite(df[i]) ? num(df[i] - r) : '—'))))));
}

// The policy's name: the job spec's (numvald keeps "amp.policy_name" next to the
// version it put inline), else the one inside the policy (the shipped default's).
export function ampName(amp, spec) {
  const sa = spec && spec.amp && typeof spec.amp === 'object' ? spec.amp : {};
  return sa.policy_name || (amp && amp.policy && amp.policy.name) || 'default';
}

export function ampText(amp, name) {
  if (!amp || !amp.enabled) return 'off: the device trains in fp32';
  const pol = amp.policy || {};
  const v = amp.policy_version;
  const ver = v === 0 || v === undefined ? 'version 0 (the worker\'s shipped default)' : `version ${v}`;
  return `${amp.dtype}, policy "${name || 'default'}" ${ver}, master weights ${amp.master_weights || pol.master_weights || '—'}`;
}

// Author, time and reason of a stored policy version (GET /amp-policies?name=), filled in when they arrive.
function ampAudit(amp, name) {
  if (!amp || !amp.enabled || !(amp.policy_version > 0)) return null;
  const el = h('span', {id: 'longrun-amp-audit'}, 'loading…');
  optional(`/amp-policies?name=${encodeURIComponent(name)}`).then((body) => {
    const p = (body && Array.isArray(body.amp_policies) ? body.amp_policies : [])
      .find((x) => x.version === amp.policy_version);
    el.textContent = p ? `by ${p.author || '—'} at ${when(p.created_at)}: ${p.reason || '—'}`
      : `version ${amp.policy_version} of "${name}" is not in this numvald's store`;
  }).catch((e) => { el.textContent = `not available (${e.message})`; });
  return el;
}

function ampPolicy(amp) {
  const pol = amp && amp.policy;
  if (!pol) return null;
  const list = (k) => (Array.isArray(pol[k]) && pol[k].length ? pol[k].join(', ') : '—');
  return h('details', h('summary', 'AMP policy op lists'), kv([
    ['Low precision', list('low_precision')], ['fp32', list('fp32')], ['Promote (widest input)', list('promote')]]));
}

function qualification(res, acc, spec) {
  const det = acc.determinism || {};
  const data = res.data || {};
  const name = ampName(res.amp, spec);
  return h('div', {id: 'longrun-summary'},
    h('p', {id: 'longrun-verdict', class: 'verdict-rule'}, badge(acc.verdict || res.verdict), ' ',
      acc.failure_class ? [h('strong.bad', {id: 'longrun-failure-class'}, acc.failure_class), ': '] : null,
      h('span.reason', acc.reason || '')),
    h('p.muted', {id: 'longrun-rule'}, 'Verdict rule: the job passes when the Welch test and the trimmed-mean ',
      'band on the final eval losses both pass, every device loss curve stays inside the reference envelope at ',
      'every logged step, the device\'s gradient and eval loss at matched weights are as accurate as the ',
      'declared precision allows, and (when "deterministic") a repeated device run is bit-identical.'),
    kv([
      ['Seeds', h('span', {id: 'longrun-seeds'}, (acc.seeds || []).join(', ') || '—')],
      ['Bit-identical on repeat', h('span', {id: 'longrun-bitident'}, bitIdentical(det))],
      ['AMP', h('span', {id: 'longrun-amp'}, ampText(res.amp, name))],
      ['AMP policy change', ampAudit(res.amp, name) || undefined],
      ['Model', `${res.model || '—'}, ${num(res.steps)} steps, batch ${num(data.batch)}`],
      ['Best achievable loss (Bayes, eval set)', num(data.bayes_loss)],
    ]),
    ampPolicy(res.amp));
}

// res: the job's result; spec: the job's spec (for the AMP policy's name).
export function longrunSection(res, spec) {
  if (!res || typeof res !== 'object' || !res.curves) return null;
  const acc = res.acceptance || {};
  const gs = res.grad_scaler || {};
  const series = lossSeries(res.curves, (acc.envelope || {}).margin);
  const chart = svgLineChart({series, title: 'Eval loss per logged step: device seeds (dashed) vs the ' +
    'fp64 reference (mean line, shaded min..max over its seeds, dotted acceptance envelope)',
  xLabel: 'step', yLabel: 'eval loss'});
  return section('Long-run training', h('div', {id: 'longrun'},
    qualification(res, acc, spec),
    rulesTable(acc),
    h('div', {id: 'longrun-loss'}, chart),
    finals(acc),
    h('h3', 'Mixed precision and gradient scaling'),
    kv([
      ['Gradient scaler', gs.enabled ? `init scale ${num(gs.init_scale)}, ×${num(gs.growth_factor)} every ` +
        `${num(gs.growth_interval)} clean steps, ×${num(gs.backoff_factor)} on overflow` : 'off'],
      ['Skipped steps (non-finite gradients, all device seeds)', h('span', {id: 'longrun-skipped'}, num(gs.skipped_steps))],
      ['Non-finite gradient elements', num(gs.nonfinite_elements)],
      ['Low-precision gradient elements exactly zero', acc.lowp_gradient_zero_fraction === undefined ? undefined
        : h('span', {id: 'longrun-lowp-zero'}, `${num(100 * acc.lowp_gradient_zero_fraction)} %`)],
      ['Time (reference / device)', res.seconds ? `${num(res.seconds.reference)} s / ${num(res.seconds.device)} s` : undefined],
    ]),
    seriesSection(res)));
}

// Progress of a long-run job for tables: training runs while it runs (numvald's
// cases_done/cases_total count runs: reference seeds, device seeds and the
// determinism repeat), seeds × steps once it has a result or is queued.
export function longrunProgress(j) {
  const res = j.result && typeof j.result === 'object' ? j.result : null;
  const spec = j.spec || {};
  const nSeeds = res && res.acceptance && Array.isArray(res.acceptance.seeds) ? res.acceptance.seeds.length
    : Array.isArray(spec.seeds) ? spec.seeds.length : spec.n_seeds ?? 8;
  const steps = res && res.steps !== undefined ? res.steps : spec.steps ?? 200;
  const shape = `${num(nSeeds)} seeds × ${num(steps)} steps`;
  if (res) return {done: 1, total: 1, label: shape};
  if (j.cases_total > 0) {
    return {done: j.cases_done || 0, total: j.cases_total, label: `${num(j.cases_done || 0)} / ${num(j.cases_total)} training runs`};
  }
  return {done: 0, total: 1, label: shape};
}
