// Long-run job (issue 7; worker/run_longrun*.c): a long-run job has no cases, its
// result sits on the job ("result"). Shown: the verdict with its reason and each
// rule's numbers (Welch's t-test and trimmed means of the final eval losses, the
// per-step envelope, determinism), the eval-loss curves of every seed, device vs
// reference, over the band (min..max) of the reference seeds, and the gradient
// scaler's record (loss scale settings, skipped steps, non-finite elements,
// low-precision gradient zeros). Returns null for a result without curves.

import {h, num, section, kv, badge} from '../util.js';
import {lineChart} from '../charts.js';

// Reference band and mean per logged step, device runs as they are.
// curves = {reference: [{seed, points: [[step, loss]...]}...], device: [...]}.
export function lossSeries(curves) {
  const ref = Array.isArray(curves.reference) ? curves.reference : [];
  const dev = Array.isArray(curves.device) ? curves.device : [];
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
  if (ref.length) {
    series.push({name: `reference: mean, band = min..max over ${ref.length} seeds`, points: mean, band});
  }
  for (const run of dev) {
    series.push({name: `device seed ${run.seed}`, points: (run.points || [])
      .map(([x, y]) => [x, typeof y === 'number' ? y : NaN]), dash: true});
  }
  return series;
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
    chart,
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
    res.series ? h('p.muted', `Per-step record (gradient norms per layer, loss scale, skipped flag): `,
      `${num(res.series.raw_bytes)} bytes of ${res.series.format || 'jsonl'}, stored ${res.series.encoding} in the job result.`) : null));
}
