// Canvas histogram (no library needed, works offline), with a text table for screen
// readers. Line charts are inline SVG: svgchart.js.

import {h, num} from './util.js';

const COLORS = ['#1f6fb2', '#c2410c', '#15803d', '#7e22ce', '#b45309', '#0e7490'];

function setup(canvas, height) {
  const dpr = window.devicePixelRatio || 1;
  const w = Math.max(240, canvas.parentElement ? canvas.parentElement.clientWidth : 600);
  canvas.width = Math.round(w * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = w + 'px';
  canvas.style.height = height + 'px';
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, height);
  const cs = getComputedStyle(canvas);
  return {g, w, hgt: height, fg: cs.color || '#222', grid: 'rgba(128,128,128,0.25)'};
}

// Bins for ULP errors: 0, (0, 0.5], (0.5, 1], (1, 2], (2, 4] ... (2^k-1, 2^k], beyond, non-finite.
export function ulpBins(values) {
  const edges = [0, 0.5, 1, 2, 4, 8, 16, 64, 256, 4096, 65536];
  const labels = ['0', '≤0.5', '≤1', '≤2', '≤4', '≤8', '≤16', '≤64', '≤256', '≤4096', '≤65536',
    '>65536', 'NaN/Inf'];
  const counts = new Array(labels.length).fill(0);
  for (const v of values) {
    if (v === null || v === undefined) continue;
    const x = typeof v === 'number' ? v : Number(v);
    if (!Number.isFinite(x)) { counts[labels.length - 1]++; continue; }
    let i = edges.findIndex((e) => x <= e);
    if (i < 0) i = edges.length;
    counts[i]++;
  }
  return {labels, counts};
}

// An element-wise ULP error histogram as a case may carry it ("ulp_histogram": bins
// of element counts) into {labels, counts}, or null when it has none of the shapes
// read here: {"edges": [e0, e1, ...], "counts": [...]} (counts[i]: elements with
// error <= edges[i] and above edges[i-1]; one more count is the elements above the
// last edge; "nonfinite" the NaN/Inf ones), {"labels": [...], "counts": [...]},
// or bins [{"le" | "upper": edge, "count": n}] (alone or under "bins").
export function elementBins(hist) {
  if (!hist || typeof hist !== 'object') return null;
  const ok = (c) => Array.isArray(c) && c.length && c.every((n) => Number.isFinite(Number(n)));
  const out = (labels, counts, nonfinite) => {
    if (nonfinite != null && Number(nonfinite) >= 0) { labels.push('NaN/Inf'); counts.push(Number(nonfinite)); }
    return {labels, counts: counts.map(Number)};
  };
  if (Array.isArray(hist.labels) && ok(hist.counts) && hist.labels.length === hist.counts.length) {
    return out(hist.labels.map(String), [...hist.counts], hist.nonfinite);
  }
  if (Array.isArray(hist.edges) && ok(hist.counts) &&
      (hist.counts.length === hist.edges.length || hist.counts.length === hist.edges.length + 1)) {
    const labels = hist.edges.map((e, i) => (i === 0 && Number(e) === 0 ? '0' : `≤${num(Number(e))}`));
    if (hist.counts.length > hist.edges.length) labels.push(`>${num(Number(hist.edges[hist.edges.length - 1]))}`);
    return out(labels, [...hist.counts], hist.nonfinite);
  }
  const bins = Array.isArray(hist) ? hist : Array.isArray(hist.bins) ? hist.bins : null;
  if (bins && bins.length && bins.every((b) => b && Number.isFinite(Number(b.count)))) {
    const labels = bins.map((b) => {
      const e = b.le ?? b.upper ?? b.edge;
      if (e === undefined || e === null) return String(b.label ?? '?');
      if (typeof e === 'string' && !Number.isFinite(Number(e))) return e;
      return Number(e) === 0 ? '0' : `≤${num(Number(e))}`;
    });
    return out(labels, bins.map((b) => b.count), Array.isArray(hist) ? null : hist.nonfinite);
  }
  return null;
}

// Drops the empty buckets above the largest error seen (they count nothing; the
// worker's fixed edges run to 2^24 ulp so that cases add up), keeping at least the
// first `keep` buckets (by default up to "≤1": exact, .., correctly rounded,
// faithful) and the NaN/Inf bucket.
export function trimBins({labels, counts}, keep = labels.indexOf('≤1') + 1 || 1) {
  const tail = labels.length && labels[labels.length - 1] === 'NaN/Inf' ? 1 : 0;
  let last = counts.length - tail - 1;
  while (last >= keep && !counts[last]) last--;
  const idx = [...Array(last + 1).keys(), ...(tail ? [labels.length - 1] : [])];
  return {labels: idx.map((i) => labels[i]), counts: idx.map((i) => counts[i])};
}

// xLabel: what the bars count, written under the axis.
export function histogram({labels, counts, title, markAt, xLabel = 'max ULP error per case'}) {
  const canvas = h('canvas', {role: 'img', 'aria-label': title});
  const table = h('table.sr-table', h('caption', title),
    h('tr', h('th', 'bin'), h('th', 'count')),
    labels.map((l, i) => h('tr', h('td', l), h('td', String(counts[i])))));
  const wrap = h('figure.chart', canvas, h('figcaption', title),
    h('details', h('summary', 'Data table'), table));
  const draw = () => {
    const {g, w, hgt, fg, grid} = setup(canvas, 220);
    const pad = {l: 44, r: 10, t: 10, b: 34};
    const pw = w - pad.l - pad.r, ph = hgt - pad.t - pad.b;
    const step = Math.max(1, Math.ceil(Math.max(1, ...counts) / 4));
    const max = step * 4;
    g.font = '11px system-ui, sans-serif';
    g.strokeStyle = grid;
    g.fillStyle = fg;
    for (let k = 0; k <= 4; k++) {
      const y = pad.t + ph - (ph * k) / 4;
      g.beginPath(); g.moveTo(pad.l, y); g.lineTo(pad.l + pw, y); g.stroke();
      g.textAlign = 'right';
      g.fillText(num(step * k), pad.l - 4, y + 4);
    }
    const bw = pw / labels.length;
    labels.forEach((l, i) => {
      const bh = (ph * counts[i]) / max;
      g.fillStyle = markAt !== undefined && i > markAt ? '#c2410c' : COLORS[0];
      g.fillRect(pad.l + i * bw + 2, pad.t + ph - bh, bw - 4, bh);
      g.fillStyle = fg;
      g.textAlign = 'center';
      g.fillText(l, pad.l + i * bw + bw / 2, pad.t + ph + 14);
    });
    g.textAlign = 'left';
    g.fillText(xLabel, pad.l, hgt - 4);
  };
  requestAnimationFrame(draw);
  window.addEventListener('resize', draw);
  return wrap;
}
