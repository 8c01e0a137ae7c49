// Canvas charts (no library needed, works offline): a histogram and line charts
// with an optional shaded band. Each chart also gets a text table for screen readers.

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

export function histogram({labels, counts, title, markAt}) {
  const canvas = h('canvas', {role: 'img', 'aria-label': title});
  const table = h('table.sr-table', h('caption', title),
    h('tr', h('th', 'bin'), h('th', 'count')),
    labels.map((l, i) => h('tr', h('td', l), h('td', counts[i]))));
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
    g.fillText('max ULP error per case', pad.l, hgt - 4);
  };
  requestAnimationFrame(draw);
  window.addEventListener('resize', draw);
  return wrap;
}

// series: [{name, points: [[x, y]...], band?: [[x, lo, hi]...], dash?: bool}]
export function lineChart({series, title, xLabel, yLabel, logY}) {
  const canvas = h('canvas', {role: 'img', 'aria-label': title});
  const legend = h('ul.legend', series.map((s, i) =>
    h('li', h('span.swatch', {style: `background:${COLORS[i % COLORS.length]}`}), s.name)));
  const wrap = h('figure.chart', canvas, legend, h('figcaption', title));
  const ty = (y) => (logY ? Math.log10(Math.max(y, 1e-30)) : y);
  const draw = () => {
    const {g, w, hgt, fg, grid} = setup(canvas, 240);
    const pad = {l: 56, r: 10, t: 10, b: 34};
    const pw = w - pad.l - pad.r, ph = hgt - pad.t - pad.b;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const s of series) {
      for (const [x, y] of s.points || []) {
        if (!Number.isFinite(y)) continue;
        x0 = Math.min(x0, x); x1 = Math.max(x1, x);
        y0 = Math.min(y0, ty(y)); y1 = Math.max(y1, ty(y));
      }
      for (const [x, lo, hi] of s.band || []) {
        x0 = Math.min(x0, x); x1 = Math.max(x1, x);
        y0 = Math.min(y0, ty(lo)); y1 = Math.max(y1, ty(hi));
      }
    }
    if (!Number.isFinite(x0)) return;
    if (x1 === x0) x1 = x0 + 1;
    if (y1 === y0) { y1 += 1; y0 -= 1; }
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * pw;
    const Y = (y) => pad.t + ph - ((ty(y) - y0) / (y1 - y0)) * ph;
    g.font = '11px system-ui, sans-serif';
    g.strokeStyle = grid;
    g.fillStyle = fg;
    for (let k = 0; k <= 4; k++) {
      const v = y0 + ((y1 - y0) * k) / 4;
      const y = pad.t + ph - (ph * k) / 4;
      g.beginPath(); g.moveTo(pad.l, y); g.lineTo(pad.l + pw, y); g.stroke();
      g.textAlign = 'right';
      g.fillText(num(logY ? 10 ** v : v), pad.l - 4, y + 4);
    }
    g.textAlign = 'center';
    for (let k = 0; k <= 4; k++) {
      const v = x0 + ((x1 - x0) * k) / 4;
      g.fillText(num(Math.round(v)), X(v), pad.t + ph + 14);
    }
    g.textAlign = 'left';
    g.fillText(`${xLabel || ''}${yLabel ? ' · ' + yLabel : ''}`, pad.l, hgt - 4);
    series.forEach((s, i) => {
      const c = COLORS[i % COLORS.length];
      if (s.band && s.band.length) {
        g.fillStyle = c + '33';
        g.beginPath();
        s.band.forEach(([x, lo], j) => (j ? g.lineTo(X(x), Y(lo)) : g.moveTo(X(x), Y(lo))));
        for (let j = s.band.length - 1; j >= 0; j--) g.lineTo(X(s.band[j][0]), Y(s.band[j][2]));
        g.closePath();
        g.fill();
      }
      g.strokeStyle = c;
      g.lineWidth = 1.5;
      g.setLineDash(s.dash ? [5, 3] : []);
      g.beginPath();
      let started = false;
      for (const [x, y] of s.points || []) {
        if (!Number.isFinite(y)) { started = false; continue; }
        if (started) g.lineTo(X(x), Y(y)); else g.moveTo(X(x), Y(y));
        started = true;
      }
      g.stroke();
      g.setLineDash([]);
    });
  };
  requestAnimationFrame(draw);
  window.addEventListener('resize', draw);
  return wrap;
}
