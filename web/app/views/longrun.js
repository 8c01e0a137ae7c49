// Long-run curves: device vs reference loss over seeds (the reference seed band
// shaded), gradient norm, loss scale, skipped steps. Shown only when the case
// carries curves (issue 7); returns null otherwise.
//
// Accepted shape: case.curves = {steps: [s...], loss: {device: [[per step]...per seed],
// reference: [[...]...]}, grad_norm: {...}, loss_scale: {...}, skipped_steps: [...]}.

import {h, num, section, kv} from '../util.js';
import {lineChart} from '../charts.js';

function seedsOf(v) {
  if (!v) return [];
  if (Array.isArray(v) && v.length && Array.isArray(v[0])) return v;
  if (Array.isArray(v)) return [v];
  if (Array.isArray(v.seeds)) return v.seeds.map((s) => (Array.isArray(s) ? s : s.values || []));
  return [];
}

function meanAndBand(steps, seeds) {
  const mean = [], band = [];
  steps.forEach((x, i) => {
    const vals = seeds.map((s) => s[i]).filter((y) => Number.isFinite(y));
    if (!vals.length) return;
    mean.push([x, vals.reduce((a, b) => a + b, 0) / vals.length]);
    band.push([x, Math.min(...vals), Math.max(...vals)]);
  });
  return {mean, band};
}

function curveChart(title, steps, metric, logY) {
  const dev = seedsOf(metric.device), ref = seedsOf(metric.reference);
  if (!dev.length && !ref.length) return null;
  const r = meanAndBand(steps, ref), d = meanAndBand(steps, dev);
  const series = [];
  if (ref.length) series.push({name: `reference (mean, band over ${ref.length} seeds)`, points: r.mean, band: r.band});
  if (dev.length) series.push({name: `device (mean over ${dev.length} seeds)`, points: d.mean, dash: true});
  return lineChart({series, title, xLabel: 'step', logY});
}

export function longrunSection(c) {
  const cv = c.curves || c.series;
  if (!cv || typeof cv !== 'object') return null;
  const steps = cv.steps || [];
  const charts = [];
  if (cv.loss) charts.push(curveChart('Loss: device vs reference', steps, cv.loss, false));
  if (cv.grad_norm) charts.push(curveChart('Global gradient norm', steps, cv.grad_norm, true));
  if (cv.loss_scale) charts.push(curveChart('Loss scale', steps, cv.loss_scale, true));
  const verdict = c.statistic || c.acceptance;
  return section('Long-run curves', h('div', {id: 'longrun'},
    verdict ? kv(Object.entries(verdict).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : num(v)])) : null,
    charts.filter(Boolean),
    cv.skipped_steps ? h('p', `Skipped steps (non-finite gradients): ${
      Array.isArray(cv.skipped_steps) ? cv.skipped_steps.length : num(cv.skipped_steps)}`) : null));
}
