// Repeated sampling (docs/SERVING.md "Repeated sampling"): the device's token
// counts over many seeded samples against the counts the reference distribution
// expects, with the G-test's statistic, degrees of freedom, p-value and
// significance level, and whether the same seed reproduced the same tokens. An
// inline SVG bar chart (observed bars, expected marks) with its data table.

import {h, num, kv} from '../util.js';
import {s, COLORS, niceTicks, tickText} from '../svgchart.js';

const MAX_BARS = 200;
let uid = 0;

// The case's sampling record (under criteria.sampling, or on the case), or null
// when it has none with a histogram.
export function samplingOf(c) {
  const cand = [c && c.criteria && c.criteria.sampling, c && c.sampling];
  return cand.find((x) => x && typeof x === 'object' && Array.isArray(x.histogram) && x.histogram.length) || null;
}

// The bars to draw: in token order; past MAX_BARS, the tokens the reference
// expects most (the table still lists every token).
export function samplingBars(hist) {
  const all = hist.map((b) => ({token: b.token, observed: Number(b.observed), expected: Number(b.expected)}))
    .sort((a, b) => a.token - b.token);
  if (all.length <= MAX_BARS) return {bars: all, total: all.length};
  const keep = new Set([...all].sort((a, b) => b.expected - a.expected).slice(0, MAX_BARS).map((b) => b.token));
  return {bars: all.filter((b) => keep.has(b.token)), total: all.length};
}

const swatch = (shape) => s('svg', {class: 'swatch-line', width: 22, height: 12, 'aria-hidden': 'true',
  focusable: 'false'}, shape);

function barChart(hist, title) {
  const {bars, total} = samplingBars(hist);
  const id = `smpc-${++uid}`;
  const w = 720, hgt = 240, pad = {l: 58, r: 12, t: 10, b: 38};
  const pw = w - pad.l - pad.r, ph = hgt - pad.t - pad.b;
  const top = Math.max(1, ...bars.map((b) => Math.max(b.observed, b.expected)));
  const yt = niceTicks(0, top, 5);
  const y1 = Math.max(top, yt[yt.length - 1] || top);
  const bw = pw / bars.length;
  const X = (i) => pad.l + i * bw, Y = (v) => pad.t + ph - (v / y1) * ph;
  const every = Math.max(1, Math.ceil(bars.length / Math.floor(pw / 40)));
  const desc = `${bars.length} tokens${bars.length < total ? ` (of ${total}, those the reference expects most)` : ''}; ` +
    `observed counts from ${num(Math.min(...bars.map((b) => b.observed)))} to ${num(Math.max(...bars.map((b) => b.observed)))}, ` +
    `expected from ${num(Math.min(...bars.map((b) => b.expected)))} to ${num(Math.max(...bars.map((b) => b.expected)))}.`;
  const svg = s('svg', {role: 'img', 'aria-labelledby': `${id}-t`, 'aria-describedby': `${id}-d`, class: 'line-chart bar-chart',
    viewBox: `0 0 ${w} ${hgt}`, width: '100%', preserveAspectRatio: 'xMinYMin meet'},
  s('title', {id: `${id}-t`}, title), s('desc', {id: `${id}-d`}, desc),
  s('g', {class: 'axes'},
    yt.map((v) => s('g', {class: 'tick y'},
      s('line', {x1: pad.l, x2: pad.l + pw, y1: Y(v).toFixed(1), y2: Y(v).toFixed(1), class: 'grid'}),
      s('text', {x: pad.l - 5, y: (Y(v) + 4).toFixed(1), 'text-anchor': 'end'}, tickText(v)))),
    bars.map((b, i) => (i % every === 0 ? s('text', {class: 'tick x', x: (X(i) + bw / 2).toFixed(1), y: pad.t + ph + 15,
      'text-anchor': 'middle'}, String(b.token)) : null)),
    s('line', {x1: pad.l, x2: pad.l + pw, y1: pad.t + ph, y2: pad.t + ph, class: 'axis'}),
    s('text', {class: 'label', x: pad.l + pw / 2, y: hgt - 4, 'text-anchor': 'middle'}, 'token'),
    s('text', {class: 'label', x: 12, y: pad.t + ph / 2, 'text-anchor': 'middle',
      transform: `rotate(-90 12 ${pad.t + ph / 2})`}, 'samples')),
  s('g', {class: 'series', 'data-name': 'observed', 'data-points': bars.length},
    bars.map((b, i) => s('rect', {class: 'bar', x: (X(i) + bw * 0.1).toFixed(1), width: Math.max(1, bw * 0.8).toFixed(1),
      y: Y(b.observed).toFixed(1), height: (pad.t + ph - Y(b.observed)).toFixed(1), fill: COLORS[0],
      'fill-opacity': 0.75, 'data-token': b.token},
    s('title', `token ${b.token}: observed ${num(b.observed)}, expected ${num(b.expected)}`)))),
  s('g', {class: 'series', 'data-name': 'expected', 'data-points': bars.length},
    bars.map((b, i) => s('line', {class: 'expected', x1: X(i).toFixed(1), x2: (X(i) + bw).toFixed(1),
      y1: Y(b.expected).toFixed(1), y2: Y(b.expected).toFixed(1), stroke: COLORS[1], 'stroke-width': 2}))));
  const rows = [...hist].sort((a, b) => a.token - b.token);
  return h('figure.chart.svg-chart', {id: 'serving-sampling-chart'}, svg,
    h('ul.legend', h('li', swatch(s('rect', {x: 3, y: 1, width: 16, height: 10, fill: COLORS[0], 'fill-opacity': 0.75})),
      ' observed (device)'),
    h('li', swatch(s('line', {x1: 1, y1: 6, x2: 21, y2: 6, stroke: COLORS[1], 'stroke-width': 2})),
      ' expected (reference distribution)')),
    h('figcaption', title),
    h('details', h('summary', 'Data table'), h('div.table-wrap', h('table.data.sr-table', {id: 'serving-sampling'},
      h('caption', `Per token: samples observed and expected (${rows.length} tokens)`),
      h('thead', h('tr', ['Token', 'Observed', 'Expected', 'Observed - expected'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', rows.map((b) => h('tr', {dataset: {token: b.token}}, h('th', {scope: 'row'}, String(b.token)),
        h('td.num', num(b.observed)), h('td.num', num(b.expected)),
        h('td.num', num(Number(b.observed) - Number(b.expected))))))))));
}

export function samplingBlock(smp) {
  const consistent = typeof smp.p === 'number' && typeof smp.alpha === 'number' ? smp.p >= smp.alpha : null;
  return h('div', {id: 'serving-sampling-block'},
    h('h3', 'Sampling histogram vs reference'),
    kv([
      ['G-test', h('span', {id: 'serving-gtest'}, 'G = ', num(smp.g), ', df ', num(smp.df), ', p = ', num(smp.p),
        ' at alpha ', num(smp.alpha), consistent === null ? '' : consistent
          ? ' (consistent with the reference distribution)' : [' ', h('strong.bad', '(rejects the reference distribution)')])],
      ['Samples', h('span', {id: 'serving-samples'}, num(smp.samples))],
      ['Same seed, same tokens', h('span', {id: 'serving-reproducible'}, smp.reproducible ? 'yes' : h('strong.bad', 'no'))],
      ['Verdict', smp.passed === undefined ? undefined : (smp.passed ? 'passed' : h('strong.bad', 'failed'))],
    ]),
    barChart(smp.histogram, `Token counts over ${num(smp.samples)} samples: the device's (bars) and the reference ` +
      'distribution\'s expected counts (marks)'));
}
