// Line charts as inline SVG, drawn by our own code (no chart library, works offline).
// Every chart carries its text alternative: the <svg> is role="img" named by its
// <title> and described by a <desc> that states the series and the axis ranges,
// and a "Data table" disclosure lists every plotted value for screen readers.
//
// series: [{name, points: [[x, y]...], band?: [[x, lo, hi]...], outer?: [[x, lo, hi]...],
//           dash?: bool, marks?: [[x, y, label]...]}]
// band: a shaded range; outer: a wider range drawn as a dotted outline (an envelope);
// marks: points singled out with a cross (e.g. skipped steps); a non-finite y breaks the line.
// links: [{x, y, href, label, failed}]: points drawn as dots that are links (a failed
// one as a ring with a cross), each named by its label.
// xTicks: [[x, text]...]: category labels on the x axis instead of numbers (the
// data table's rows are named by them too). yRange: [lo, hi] the y axis covers at least.

import {h, num} from './util.js';

const NS = 'http://www.w3.org/2000/svg';
export const COLORS = ['#1f6fb2', '#c2410c', '#15803d', '#7e22ce', '#b45309', '#0e7490', '#be185d', '#4d7c0f'];
const MAX_TABLE_ROWS = 400;
let uid = 0;

// An SVG element: s('path', {d: 'M0 0'}, child...).
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
  return el;
}

// About n "nice" ticks (1, 2 or 5 times a power of ten) covering [lo, hi]: the
// step whose tick count comes closest to n (ties: the wider step).
export function niceTicks(lo, hi, n = 5) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return [];
  if (hi < lo) [lo, hi] = [hi, lo];
  if (hi === lo) return [lo];
  const p = 10 ** Math.floor(Math.log10((hi - lo) / Math.max(1, n - 1)));
  const count = (st) => Math.floor(hi / st + 1e-9) - Math.ceil(lo / st - 1e-9) + 1;
  let step = null;
  for (const st of [0.5, 1, 2, 5, 10, 20].map((m) => m * p)) {
    if (step === null || Math.abs(count(st) - n) <= Math.abs(count(step) - n)) step = st;
  }
  const out = [];
  for (let k = Math.ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k++) {
    out.push(Number((k * step).toPrecision(12)));
  }
  return out;
}

// Ticks of a log axis over [lo, hi] (both positive): decades 10^k when the range
// spans two or more, else powers of two (a loss scale's own values) when at least
// two fit, else nice ticks of the values themselves.
export function logTicks(lo, hi) {
  const pick = (a, b, base) => {
    const every = Math.max(1, Math.ceil((b - a + 1) / 6));
    const out = [];
    for (let k = a; k <= b; k += every) out.push(base ** k);
    return out;
  };
  const a = Math.ceil(Math.log10(lo) - 1e-9), b = Math.floor(Math.log10(hi) + 1e-9);
  if (b - a >= 1) return pick(a, b, 10);
  const a2 = Math.ceil(Math.log2(lo) - 1e-9), b2 = Math.floor(Math.log2(hi) + 1e-9);
  if (b2 - a2 >= 1) return pick(a2, b2, 2);
  return niceTicks(lo, hi, 4).filter((v) => v > 0);
}

// Tick label: at most 3 significant digits, exponent form without padding zeros
// ("1.2e-6", "8e-7") for tiny or huge values, so labels fit the margin.
export function tickText(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return Number(v.toPrecision(3)).toExponential().replace('e+', 'e');
  return num(Number(v.toPrecision(6)));
}

// Extent of every finite value the chart will draw (points, bands, marks).
export function extent(series, logY) {
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  const ok = (y) => Number.isFinite(y) && (!logY || y > 0);
  const take = (x, y) => {
    if (!ok(y) || !Number.isFinite(x)) return;
    x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
  };
  for (const sr of series) {
    for (const [x, y] of sr.points || []) take(x, y);
    for (const [x, lo, hi] of [...(sr.band || []), ...(sr.outer || [])]) { take(x, lo); take(x, hi); }
    for (const [x, y] of sr.marks || []) take(x, y);
    for (const p of sr.links || []) take(p.x, p.y);
  }
  return {x0, x1, y0, y1};
}

// Path data of a polyline in screen coordinates; a non-finite point starts a new piece.
export function linePath(points, X, Y) {
  let d = '', pen = false;
  for (const [x, y] of points) {
    const py = Y(y);
    if (!Number.isFinite(py)) { pen = false; continue; }
    d += `${pen ? 'L' : 'M'}${X(x).toFixed(1)} ${py.toFixed(1)}`;
    pen = true;
  }
  return d;
}

function areaPath(band, X, Y) {
  const ok = band.filter(([, lo, hi]) => Number.isFinite(Y(lo)) && Number.isFinite(Y(hi)));
  if (!ok.length) return '';
  const top = ok.map(([x, , hi], i) => `${i ? 'L' : 'M'}${X(x).toFixed(1)} ${Y(hi).toFixed(1)}`).join('');
  const bottom = ok.slice().reverse().map(([x, lo]) => `L${X(x).toFixed(1)} ${Y(lo).toFixed(1)}`).join('');
  return `${top}${bottom}Z`;
}

function describe(series, ext, {xLabel, yLabel, logY}) {
  const names = series.map((sr) => sr.name).join('; ');
  if (!Number.isFinite(ext.x0)) return `No finite values to plot. Series: ${names}.`;
  return `${series.length} series (${names}). ${xLabel || 'x'} from ${num(ext.x0)} to ${num(ext.x1)}; ` +
    `${yLabel || 'y'} from ${num(ext.y0)} to ${num(ext.y1)}${logY ? ' (logarithmic axis)' : ''}.`;
}

function dataTable(series, title, xLabel, xTicks) {
  const xName = new Map(xTicks || []);
  const xs = [...new Set(series.flatMap((sr) => [...(sr.points || []), ...(sr.band || [])].map((p) => p[0])))]
    .sort((a, b) => a - b);
  const cols = [];
  for (const sr of series) {
    const pts = new Map((sr.points || []).map(([x, y]) => [x, y]));
    if (sr.band) {
      const b = new Map(sr.band.map(([x, lo, hi]) => [x, [lo, hi]]));
      cols.push({name: `${sr.name} (min)`, at: (x) => b.get(x)?.[0]});
      cols.push({name: `${sr.name} (line)`, at: (x) => pts.get(x)});
      cols.push({name: `${sr.name} (max)`, at: (x) => b.get(x)?.[1]});
    } else {
      cols.push({name: sr.name, at: (x) => pts.get(x)});
    }
  }
  const rows = xs.slice(0, MAX_TABLE_ROWS);
  return h('details', h('summary', 'Data table'),
    h('div.table-wrap', h('table.data.sr-table',
      h('caption', title + (rows.length < xs.length ? ` (first ${rows.length} of ${xs.length} rows)` : '')),
      h('thead', h('tr', h('th', {scope: 'col'}, xLabel || 'x'), cols.map((c) => h('th', {scope: 'col'}, c.name)))),
      h('tbody', rows.map((x) => h('tr', h('th', {scope: 'row'}, xName.has(x) ? xName.get(x) : num(x)),
        cols.map((c) => h('td.num', num(c.at(x))))))))));
}

function legendItem(sr, i) {
  const c = COLORS[i % COLORS.length];
  const sw = s('svg', {class: 'swatch-line', width: 22, height: 12, 'aria-hidden': 'true', focusable: 'false'},
    sr.band ? s('rect', {x: 0, y: 1, width: 22, height: 10, fill: c, 'fill-opacity': 0.2}) : null,
    s('line', {x1: 1, y1: 6, x2: 21, y2: 6, stroke: c, 'stroke-width': 2,
      'stroke-dasharray': sr.dash ? '5 3' : null}));
  return h('li', {dataset: {series: i}}, sw, ' ', sr.name);
}

// The x tick labels: numbers (nice ticks), or the given category labels thinned so
// about one fits per 70 px.
function xTickList(xTicks, x0, x1, pw) {
  if (!xTicks) return niceTicks(x0, x1, 6).map((v) => [v, tickText(v)]);
  const every = Math.max(1, Math.ceil(xTicks.length / Math.max(1, Math.floor(pw / 70))));
  return xTicks.filter((_, i) => i % every === 0 || i === xTicks.length - 1);
}

// Draws the plot into svg for a width w (in CSS pixels; the viewBox follows it).
function draw(svg, titleEl, descEl, series, o, w) {
  const hgt = o.height || 260;
  const pad = {l: 58, r: 12, t: 10, b: 38};
  const pw = Math.max(40, w - pad.l - pad.r), ph = hgt - pad.t - pad.b;
  svg.setAttribute('viewBox', `0 0 ${w} ${hgt}`);
  svg.setAttribute('width', w);
  svg.setAttribute('height', hgt);
  const ext = extent(series, o.logY);
  const kids = [titleEl, descEl];
  if (Number.isFinite(ext.x0)) {
    let {x0, x1, y0, y1} = ext;
    if (x1 === x0) x1 = x0 + 1;
    // A fixed y range the data is drawn in (an agreement's 0..1), widened to fit any value outside it.
    if (o.yRange) { y0 = Math.min(y0, o.yRange[0]); y1 = Math.max(y1, o.yRange[1]); }
    const ty = (y) => (o.logY ? (y > 0 ? Math.log10(y) : NaN) : y);
    let t0 = ty(y0), t1 = ty(y1);
    if (t1 === t0) { t0 -= o.logY ? 0.5 : Math.abs(t0) * 0.05 || 1; t1 += o.logY ? 0.5 : Math.abs(t1) * 0.05 || 1; }
    const X = (x) => pad.l + ((x - x0) / (x1 - x0)) * pw;
    const Y = (y) => pad.t + ph - ((ty(y) - t0) / (t1 - t0)) * ph;
    const yt = o.logY ? logTicks(10 ** t0, 10 ** t1) : niceTicks(t0, t1, 5);
    const axes = s('g', {class: 'axes'},
      yt.map((v) => s('g', {class: 'tick y'},
        s('line', {x1: pad.l, x2: pad.l + pw, y1: Y(v).toFixed(1), y2: Y(v).toFixed(1), class: 'grid'}),
        s('text', {x: pad.l - 5, y: (Y(v) + 4).toFixed(1), 'text-anchor': 'end'}, tickText(v)))),
      xTickList(o.xTicks, x0, x1, pw).map(([v, t]) => s('text', {class: 'tick x', x: X(v).toFixed(1), y: pad.t + ph + 15,
        'text-anchor': 'middle'}, t)),
      s('line', {x1: pad.l, x2: pad.l + pw, y1: pad.t + ph, y2: pad.t + ph, class: 'axis'}),
      s('line', {x1: pad.l, x2: pad.l, y1: pad.t, y2: pad.t + ph, class: 'axis'}),
      s('text', {class: 'label', x: pad.l + pw / 2, y: hgt - 4, 'text-anchor': 'middle'}, o.xLabel || ''),
      s('text', {class: 'label', x: 12, y: pad.t + ph / 2, 'text-anchor': 'middle',
        transform: `rotate(-90 12 ${pad.t + ph / 2})`}, o.yLabel || ''));
    const plot = s('g', {class: 'plot'}, series.map((sr, i) => {
      const c = COLORS[i % COLORS.length];
      const pts = sr.points || [];
      return s('g', {class: 'series', 'data-series': i, 'data-name': sr.name, 'data-points': pts.length},
        sr.outer && sr.outer.length ? s('path', {class: 'envelope', d: areaPath(sr.outer, X, Y), fill: 'none',
          stroke: c, 'stroke-width': 1, 'stroke-dasharray': '2 3', 'stroke-opacity': 0.7}) : null,
        sr.band && sr.band.length ? s('path', {class: 'band', d: areaPath(sr.band, X, Y), fill: c,
          'fill-opacity': 0.18, stroke: 'none'}) : null,
        s('path', {class: 'line', d: linePath(pts, X, Y), fill: 'none', stroke: c, 'stroke-width': 1.6,
          'stroke-linejoin': 'round', 'stroke-dasharray': sr.dash ? '6 3' : null}),
        (sr.marks || []).filter(([, y]) => Number.isFinite(Y(y))).map(([x, y, label]) => s('path', {class: 'mark',
          d: `M${X(x) - 4} ${Y(y) - 4}l8 8m0 -8l-8 8`, stroke: c, 'stroke-width': 2},
        s('title', label || `${num(x)}: ${num(y)}`))),
        (sr.links || []).filter((p) => Number.isFinite(Y(p.y))).map((p) => {
          const cx = X(p.x), cy = Y(p.y);
          return s('a', {class: 'point', href: p.href, 'aria-label': p.label, 'data-x': p.x,
            'data-verdict': p.failed ? 'failed' : 'passed'},
          s('title', p.label),
          // A failed point's ring and cross take their colour from the stylesheet (--bad).
          s('circle', {cx: cx.toFixed(1), cy: cy.toFixed(1), r: p.failed ? 5.5 : 4, fill: c, stroke: c}),
          p.failed ? s('path', {class: 'fail-mark', d: `M${(cx - 3).toFixed(1)} ${(cy - 3).toFixed(1)}l6 6m0 -6l-6 6`,
            'stroke-width': 2}) : null);
        }));
    }));
    kids.push(axes, plot);
  }
  descEl.textContent = describe(series, ext, o);
  svg.replaceChildren(...kids);
}

// A figure with the SVG chart, its legend, caption and data table.
export function svgLineChart({series, title, xLabel, yLabel, logY, height, xTicks, yRange}) {
  const id = `svgc-${++uid}`;
  const titleEl = s('title', {id: `${id}-t`}, title);
  const descEl = s('desc', {id: `${id}-d`});
  const svg = s('svg', {role: 'img', 'aria-labelledby': `${id}-t`, 'aria-describedby': `${id}-d`,
    class: 'line-chart', preserveAspectRatio: 'xMinYMin meet'});
  const o = {xLabel, yLabel, logY, height, xTicks, yRange};
  let w = 720;
  draw(svg, titleEl, descEl, series, o, w);
  const fig = h('figure.chart.svg-chart', svg,
    h('ul.legend', series.map(legendItem)), h('figcaption', title), dataTable(series, title, xLabel, xTicks));
  // Redraw at the width the page gives it, so text keeps its size on a phone.
  if (typeof ResizeObserver === 'function') {
    new ResizeObserver((entries) => {
      const cw = Math.round(entries[0].contentRect.width);
      if (cw >= 200 && Math.abs(cw - w) > 4) { w = cw; draw(svg, titleEl, descEl, series, o, w); }
    }).observe(fig);
  }
  return fig;
}
