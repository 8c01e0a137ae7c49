// Unit tests of the web UI's pure modules (no browser needed): hash routing,
// number formatting, ULP histogram binning. Expected values are worked out by hand.
//   node --test modules.mjs

import {test} from 'node:test';
import assert from 'node:assert/strict';
import {parseHash, route, match, href} from '../../web/app/router.js';
import {num, qs} from '../../web/app/util.js';
import {ulpBins} from '../../web/app/charts.js';

test('parseHash splits path and query', () => {
  assert.deepEqual(parseHash('#/jobs/12?verdict=failed&cursor=40'),
    {path: '/jobs/12', query: {verdict: 'failed', cursor: '40'}});
  assert.deepEqual(parseHash(''), {path: '/', query: {}});
  assert.deepEqual(parseHash('#/'), {path: '/', query: {}});
});

test('routes match whole paths and decode parameters', () => {
  const view = () => {};
  route('/t-cases/:id', view);
  assert.deepEqual(match('/t-cases/7'), {view, params: {id: '7'}});
  assert.deepEqual(match('/t-cases/a%20b'), {view, params: {id: 'a b'}});
  assert.equal(match('/t-cases/7/x'), null);
  assert.equal(match('/t-cases'), null);
});

test('href and qs drop empty values', () => {
  assert.equal(href('/jobs', {state: 'failed', kind: '', device: null}), '#/jobs?state=failed');
  assert.equal(href('/jobs', {}), '#/jobs');
  assert.equal(qs({limit: 100, cursor: ''}), '?limit=100');
  assert.equal(qs({}), '');
});

test('num keeps integers and shows 4 significant digits otherwise', () => {
  assert.equal(num(3), '3');
  assert.equal(num(0.123456), '0.1235');
  assert.equal(num(2.5e-7), '2.500e-7');
  assert.equal(num(1234567.5), '1.235e+6');
  assert.equal(num(Infinity), '+Inf');
  assert.equal(num(NaN), 'NaN');
  assert.equal(num(null), '—');
});

test('ulpBins puts each error in the smallest bin whose edge holds it', () => {
  // 0 -> "0"; 0.5 -> "≤0.5"; 0.75 and 1 -> "≤1"; 1.5 -> "≤2"; 3 -> "≤4";
  // 1e6 -> ">65536"; Infinity and NaN -> "NaN/Inf"; null is skipped.
  const {labels, counts} = ulpBins([0, 0.5, 0.75, 1, 1.5, 3, 1e6, Infinity, NaN, null]);
  const got = Object.fromEntries(labels.map((l, i) => [l, counts[i]]).filter(([, c]) => c));
  assert.deepEqual(got, {'0': 1, '≤0.5': 1, '≤1': 2, '≤2': 1, '≤4': 1, '>65536': 1, 'NaN/Inf': 2});
  assert.equal(counts.reduce((a, b) => a + b, 0), 9);
});

test('parseMetrics reads queue depth and jobs by state from Prometheus text', async () => {
  const {parseMetrics} = await import('../../web/app/views/dashboard.js');
  const text = [
    '# HELP numvald_jobs Jobs in the store, by state.',
    '# TYPE numvald_jobs gauge',
    'numvald_jobs{state="queued"} 3',
    'numvald_jobs{state="failed"} 12',
    '# TYPE numvald_queue_depth gauge',
    'numvald_queue_depth 3',
    'numvald_queue_depth_other 99',
  ].join('\n');
  const m = parseMetrics(text);
  assert.equal(m.queue_depth, 3);
  assert.deepEqual(m.jobs, {queued: 3, failed: 12});
  assert.deepEqual(parseMetrics(null), {jobs: {}});
});

test('fusedLayers: inputs first, each node one layer after the deepest value it reads', async () => {
  const {fusedLayers} = await import('../../web/app/views/fused.js');
  // Hand-drawn: a, b inputs; m = mul(a, b) -> 1; n = add(m, a) -> 2; o = add(b, b) -> 1;
  // r = add(n, o) -> 3.
  const nodes = [{name: 'm', inputs: ['a', 'b']}, {name: 'n', inputs: ['m', 'a']},
    {name: 'o', inputs: ['b', 'b']}, {name: 'r', inputs: ['n', 'o']}];
  const names = fusedLayers(nodes).map((l) => l.map((x) => x.name));
  assert.deepEqual(names, [['a', 'b'], ['m', 'o'], ['n'], ['r']]);
  assert.equal(fusedLayers(nodes)[0][0].input, true);
});

test('lossSeries: reference mean and min..max band per step, one line per device seed', async () => {
  const {lossSeries} = await import('../../web/app/views/longrun.js');
  const s = lossSeries({
    reference: [{seed: 1, points: [[0, 2], [5, 1]]}, {seed: 2, points: [[0, 4], [5, 1.5]]},
      {seed: 3, points: [[0, 3], [5, null]]}],
    device: [{seed: 1, points: [[0, 2.5], [5, 1.2]]}, {seed: 2, points: [[0, 3.5], [5, 'nan']]}],
  });
  assert.equal(s.length, 3);
  // step 0: {2, 4, 3} -> mean 3, band [2, 4]; step 5: {1, 1.5} (null is not a loss) -> 1.25, [1, 1.5].
  assert.deepEqual(s[0].points, [[0, 3], [5, 1.25]]);
  assert.deepEqual(s[0].band, [[0, 2, 4], [5, 1, 1.5]]);
  assert.match(s[0].name, /over 3 seeds/);
  assert.deepEqual(s[1].points, [[0, 2.5], [5, 1.2]]);
  assert.equal(s[2].name, 'device seed 2');
  assert.ok(Number.isNaN(s[2].points[1][1]));
});

test('zstdDecompress gives back what the reference zstd CLI compressed', async (t) => {
  const {execFileSync} = await import('node:child_process');
  const {zstdDecompress} = await import('../../web/app/zstd.js');
  try { execFileSync('zstd', ['--version']); } catch (e) { t.skip('no zstd CLI'); return; }
  // Inputs that take each path: raw blocks (random bytes), RLE literals and long
  // matches (repeats), Huffman literals in 1 and 4 streams with FSE sequences
  // (text), several blocks (> 128 KiB), an empty frame.
  let x = 12345;
  const rnd = Buffer.alloc(70000).map(() => { x = (x * 1103515245 + 12345) >>> 0; return x >>> 24; });
  const lines = [];
  for (let i = 0; i < 6000; i++) lines.push(JSON.stringify({run: i % 2 ? 'device' : 'reference', step: i, loss: 1 / (i + 1)}));
  const inputs = [Buffer.alloc(0), Buffer.from('a'), Buffer.from('abc'.repeat(40000)), rnd, Buffer.from(lines.join('\n'))];
  for (const raw of inputs) {
    for (const level of ['-1', '-19']) {
      const z = execFileSync('zstd', ['-q', '-c', level], {input: raw});
      assert.ok(Buffer.from(zstdDecompress(new Uint8Array(z))).equals(raw), `${raw.length} bytes at ${level}`);
    }
  }
});

test('niceTicks: steps of 1, 2 or 5 x 10^k, count closest to the asked number', async () => {
  const {niceTicks, logTicks} = await import('../../web/app/svgchart.js');
  // 0.78..1.7 over 5 ticks: step 0.2 gives 0.8..1.6 (5 ticks); 0.5 would give 2.
  assert.deepEqual(niceTicks(0.78, 1.7, 5), [0.8, 1, 1.2, 1.4, 1.6]);
  assert.deepEqual(niceTicks(0, 40, 5), [0, 10, 20, 30, 40]);
  assert.deepEqual(niceTicks(-3, 7, 5), [-2, 0, 2, 4, 6]);
  assert.deepEqual(niceTicks(2, 2), [2]);
  assert.deepEqual(niceTicks(NaN, 1), []);
  // Log axis: decades over >= 2 decades, powers of two (a loss scale) below.
  assert.deepEqual(logTicks(1e-3, 10), [1e-3, 1e-2, 1e-1, 1, 10]);
  assert.deepEqual(logTicks(65536, 262144), [65536, 131072, 262144]);
  assert.deepEqual(logTicks(0.4, 1.1), [0.5, 1]);
});

test('tickText: 3 significant digits, short exponents for tiny and huge values', async () => {
  const {tickText} = await import('../../web/app/svgchart.js');
  assert.deepEqual([1.2e-6, 8e-7, 1234567, 262144, 0.30000000000000004, 0, -2].map(tickText),
    ['1.2e-6', '8e-7', '1.23e6', '262144', '0.3', '0', '-2']);
});

test('linePath: one move per unbroken piece, a non-finite value breaks the line', async () => {
  const {linePath} = await import('../../web/app/svgchart.js');
  const X = (x) => 10 * x, Y = (y) => (Number.isFinite(y) ? 100 - y : NaN);
  assert.equal(linePath([[0, 1], [1, 2], [2, NaN], [3, 4]], X, Y), 'M0.0 99.0L10.0 98.0M30.0 96.0');
  assert.equal(linePath([], X, Y), '');
});

test('long-run helpers: envelope, skipped-step marks, per-layer norms, progress', async () => {
  const {lossSeries, scaleSeries, layerNorms, longrunProgress, bitIdentical} =
    await import('../../web/app/views/longrun.js');
  // Envelope (docs/JOBS.md rule 3): [min, max] widened by margin*|bound|: 2 - 0.1*2, 4 + 0.1*4.
  const s = lossSeries({reference: [{seed: 1, points: [[0, 2]]}, {seed: 2, points: [[0, 4]]}], device: []}, 0.1);
  assert.deepEqual(s[0].outer, [[0, 1.8, 4.4]]);
  assert.equal(lossSeries({reference: [{seed: 1, points: [[0, 2]]}], device: []}).length, 1);
  assert.equal(lossSeries({reference: [{seed: 1, points: [[0, 2]]}], device: []})[0].outer, undefined);
  const recs = [{step: 0, scale: 65536, skipped: false}, {step: 5, scale: 32768, skipped: true, nonfinite: 3}];
  const sc = scaleSeries([{seed: 4, recs}]);
  assert.deepEqual(sc[0].points, [[0, 65536], [5, 32768]]);
  assert.equal(sc[0].marks.length, 1);
  assert.deepEqual(sc[0].marks[0].slice(0, 2), [5, 32768]);
  const ln = layerNorms({
    reference: [{seed: 1, recs: [{step: 9, layer_grad_norms: {fc1: 1, fc2: 2}}]},
      {seed: 2, recs: [{step: 9, layer_grad_norms: {fc1: 3, fc2: 'inf'}}]}],
    device: [{seed: 1, recs: [{step: 0, layer_grad_norms: {fc1: 9}}, {step: 9, layer_grad_norms: {fc1: 5, fc2: 6}}]}],
  });
  assert.deepEqual(ln.layers, ['fc1', 'fc2']);
  assert.deepEqual(ln.reference, [2, 2]); // fc2: the non-numeric "inf" is left out of the mean
  assert.deepEqual(ln.device, [{seed: 1, step: 9, norms: [5, 6]}]);
  // Running: numvald's cases count training runs (3 reference + 3 device + 1 repeat).
  assert.equal(longrunProgress({kind: 'longrun', spec: {n_seeds: 3, steps: 40}, cases_done: 2, cases_total: 7}).label,
    '2 / 7 training runs');
  assert.equal(longrunProgress({kind: 'longrun', spec: {seeds: [4, 5], steps: 10}, cases_total: 0}).label,
    '2 seeds × 10 steps');
  // Spec defaults (docs/JOBS.md): 8 seeds, 200 steps.
  assert.equal(longrunProgress({kind: 'longrun', spec: {kind: 'longrun'}}).label, '8 seeds × 200 steps');
  assert.equal(longrunProgress({kind: 'longrun', spec: {}, result: {steps: 60, acceptance: {seeds: [1, 2, 3]}}}).label,
    '3 seeds × 60 steps');
  assert.equal(bitIdentical({bit_identical: true}), 'yes');
  assert.equal(bitIdentical({bit_identical: false}), 'no');
  assert.equal(bitIdentical({}), 'not checked');
});

test('long-run drift text: direction, seed count, share of the band', async () => {
  const {driftText} = await import('../../web/app/views/longrun.js');
  // The bf16-master-weights run of tests/integration/test_longrun.py.
  const t = driftText({mean_gap: 0.0028, sd: 0.0015, t: 5.3, p: 0.0011, device_worse: 8, device_better: 0,
    of: 8, fraction_of_band: 0.06});
  assert.match(t, /device worse on 8 of 8 seeds/);
  assert.match(t, /6% of the band/);
  assert.match(driftText({mean_gap: -1e-5, device_worse: 3, device_better: 5, of: 8, fraction_of_band: 0}),
    /device better on 5 of 8 seeds/);
});

test('build compare rows name each kind of case', async () => {
  const {matchText} = await import('../../web/app/views/builds.js');
  assert.equal(matchText({kind: 'op', op: 'exp', dtype: 'fp32', shape: [2048], layout: 'contiguous', input: 'normal',
    attrs: {}}), 'exp · fp32 · [2048] · contiguous · normal');
  assert.equal(matchText({kind: 'gradient', op: 'sigmoid', dtype: 'fp32', shape: [4, 32], layout: 'contiguous',
    input: 'normal', attrs: {}, mode: 'full'}), 'gradient (full) · sigmoid · fp32 · [4×32] · contiguous · normal');
  assert.equal(matchText({kind: 'fused', graph: 'attention', graph_hash: '756d9988aef76d820115', dtype: 'bf16',
    input: 'normal'}), 'fused · attention · bf16 · normal · graph 756d9988aef7…');
});
