// Long-run job (issue 7; worker/run_longrun*.c): a long-run job has no cases, its
// result sits on the job ("result"). Shown: the verdict with its reason and each
// rule's numbers (Welch's t-test and trimmed means of the final eval losses, the
// per-step envelope, determinism), the eval-loss curves of every seed, device vs
// reference, over the band (min..max) of the reference seeds, and the gradient
// scaler's record (loss scale settings, skipped steps, non-finite elements,
// low-precision gradient zeros). Returns null for a result without curves.

import {h, num, section, kv, badge} from '../util.js';
import {lineChart} from '../charts.js';
import {zstdDecompress, base64Bytes} from '../zstd.js';

// A quantity per logged step: the reference runs as a mean line over their
// min..max band, each device run as its own dashed line.
// runs: [{seed, points: [[step, value]...]}...]
export function bandSeries(ref, dev, what) {
  const at = new Map();
  for (const run of ref) {
    for (const [x, y] of run.points || []) {
      if (typeof y !== 'number' || !Number.isFinite(y)) continue;
      if (!at.has(x)) at.set(x, []);
      at.get(x).push(y);
    }
  }
  const steps = [...at.keys()].sort((a, b) => a - b);
  const band = steps.map((x) => [x, Math.min(...at.get(x)), Math.max(...at.get(x))]);
  const mean = steps.map((x) => [x, at.get(x).reduce((a, b) => a + b, 0) / at.get(x).length]);
  const series = [];
  if (ref.length) series.push({name: `${what}: mean, band = min..max over ${ref.length} seeds`, points: mean, band});
  for (const run of dev) {
    series.push({name: `device seed ${run.seed}`, points: (run.points || [])
      .map(([x, y]) => [x, typeof y === 'number' ? y : NaN]), dash: true});
  }
  return series;
}

// curves = {reference: [{seed, points: [[step, loss]...]}...], device: [...]}.
export function lossSeries(curves) {
  const ref = Array.isArray(curves.reference) ? curves.reference : [];
  const dev = Array.isArray(curves.device) ? curves.device : [];
  return bandSeries(ref, dev, 'reference');
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
  return h('div', {id: 'longrun-series'},
    h('p.muted', {id: 'longrun-series-info'}, `Per-step record: ${n} logged steps over ${runs.reference.length} ` +
      `reference and ${runs.device.length} device runs (${num(sr.raw_bytes)} bytes of jsonl, ${num(sr.compressed_bytes)} ` +
      'stored zstd+base64 in the job result).'),
    h('div', {id: 'longrun-gradnorm'}, lineChart({series: bandSeries(pick(runs.reference, 'grad_norm'),
      pick(runs.device, 'grad_norm'), 'reference'), title: 'Global gradient norm (unscaled) per logged step',
    xLabel: 'step', yLabel: 'gradient norm (log)', logY: true})),
    h('div', {id: 'longrun-scale'}, lineChart({series: pick(runs.device, 'scale').map((r) => ({
      name: `device seed ${r.seed}`, points: r.points})), title: 'Loss scale of the dynamic gradient scaler ' +
      '(device runs; the fp64 reference trains unscaled)', xLabel: 'step', yLabel: 'loss scale (log)', logY: true})),
    h('p', {id: 'longrun-skipped-steps'}, 'Skipped among the logged steps: ', skipped.map((x, i) =>
      [i ? '; ' : '', `seed ${x.seed}: `, x.steps.length ? x.steps.join(', ') : 'none'])));
}

function ruleText(r) { return r && r.rule ? h('div.muted.rule-text', r.rule) : null; }

function passed(v) { return v === undefined ? '—' : badge(v ? 'passed' : 'failed'); }

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
      h('tr', {dataset: {rule: 'determinism'}}, h('th', {scope: 'row'}, 'Determinism'),
        h('td', det.seed !== undefined ? `seed ${det.seed}` : '', ruleText(det)),
        h('td', det.bit_identical === undefined ? 'not checked' : passed(det.bit_identical))))));
}

function finals(acc) {
  const fin = acc.final_loss || {}, seeds = acc.seeds || [];
  const rf = fin.reference_final || [], df = fin.device_final || [];
  if (!rf.length && !df.length) return null;
  return h('div.table-wrap', h('table.data', {id: 'longrun-finals'},
    h('caption', 'Final eval loss per seed'),
    h('thead', h('tr', ['Seed', 'Reference (fp64)', 'Device'].map((x) => h('th', {scope: 'col'}, x)))),
    h('tbody', rf.map((r, i) => h('tr', h('td', String(seeds[i] ?? i)), h('td.num', num(r)), h('td.num', num(df[i])))))));
}

export function longrunSection(res) {
  if (!res || typeof res !== 'object' || !res.curves) return null;
  const acc = res.acceptance || {};
  const gs = res.grad_scaler || {}, amp = res.amp || {};
  const chart = lineChart({series: lossSeries(res.curves), title: 'Eval loss per step: device seeds (dashed) vs the ' +
    'fp64 reference (mean line, shaded min..max over its seeds)', xLabel: 'step', yLabel: 'eval loss'});
  return section('Long-run training', h('div', {id: 'longrun'},
    h('p', {id: 'longrun-verdict', class: 'verdict-rule'}, badge(acc.verdict || res.verdict), ' ',
      acc.failure_class ? h('strong.bad', `${acc.failure_class}: `) : null, h('span.reason', acc.reason || '')),
    h('p.muted', 'Verdict rule: the job passes when the Welch test and the trimmed-mean band on the final eval ',
      'losses both pass, every device loss curve stays inside the reference envelope at every logged step, ',
      'and (when "deterministic") a repeated device run is bit-identical.'),
    rulesTable(acc),
    h('div', {id: 'longrun-loss'}, chart),
    finals(acc),
    h('h3', 'Mixed precision and gradient scaling'),
    kv([
      ['Model', res.model], ['Steps', num(res.steps)],
      ['AMP', amp.enabled ? `${amp.dtype}, policy v${amp.policy_version}, master weights ${amp.master_weights}` : 'off (fp32)'],
      ['Gradient scaler', gs.enabled ? `init scale ${num(gs.init_scale)}, ×${num(gs.growth_factor)} every ` +
        `${num(gs.growth_interval)} clean steps, ×${num(gs.backoff_factor)} on overflow` : 'off'],
      ['Skipped steps (non-finite gradients, all device seeds)', h('span', {id: 'longrun-skipped'}, num(gs.skipped_steps))],
      ['Non-finite gradient elements', num(gs.nonfinite_elements)],
      ['Low-precision gradient elements exactly zero', acc.lowp_gradient_zero_fraction === undefined ? undefined
        : `${num(100 * acc.lowp_gradient_zero_fraction)} %`],
      ['Time (reference / device)', res.seconds ? `${num(res.seconds.reference)} s / ${num(res.seconds.device)} s` : undefined],
    ]),
    seriesSection(res)));
}
