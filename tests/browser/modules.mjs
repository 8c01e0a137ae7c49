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

test('bits: known encodings in every dtype, round to nearest even', async () => {
  const {bitsHex, bitFields, encodeBits} = await import('../../web/app/bits.js');
  const cases = [
    // The values the issue names (IEEE 754-2019 §3.4; OFP8 v1.0 tables 1 and 2).
    [1, 'fp32', '0x3f800000'], [1, 'bf16', '0x3f80'], [65504, 'fp16', '0x7bff'], [2 ** -24, 'fp16', '0x0001'],
    [448, 'fp8_e4m3', '0x7e'], [448, 'e4m3fn', '0x7e'], [57344, 'fp8_e5m2', '0x7b'], [57344, 'e5m2', '0x7b'],
    [1, 'fp64', '0x3ff0000000000000'], [-2, 'fp64', '0xc000000000000000'],
    // NaN: the quiet NaN (e4m3fn's only NaN is S.1111.111); the API sends it as "nan".
    ['nan', 'fp32', '0x7fc00000'], ['nan', 'bf16', '0x7fc0'], ['nan', 'fp16', '0x7e00'], ['nan', 'e4m3fn', '0x7f'],
    ['nan', 'e5m2', '0x7e'], ['nan', 'fp64', '0x7ff8000000000000'], [NaN, 'fp32', '0x7fc00000'],
    // Signed zeros.
    [0, 'fp32', '0x00000000'], [-0, 'fp32', '0x80000000'], [-0, 'bf16', '0x8000'], [-0, 'fp16', '0x8000'],
    [-0, 'e4m3fn', '0x80'], [-0, 'e5m2', '0x80'], [-0, 'fp64', '0x8000000000000000'],
    // Infinities; e4m3fn has none, so they give its NaN (OFP8 §4, non-saturating).
    ['inf', 'fp32', '0x7f800000'], ['-inf', 'fp32', '0xff800000'], [Infinity, 'bf16', '0x7f80'],
    ['-inf', 'fp16', '0xfc00'], ['inf', 'e5m2', '0x7c'], ['-inf', 'e5m2', '0xfc'], ['inf', 'e4m3fn', '0x7f'],
    ['-inf', 'e4m3fn', '0xff'], ['inf', 'fp64', '0x7ff0000000000000'],
    // Ties to even: 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7 (odd) -> 1; 1 + 3*2^-8
    // is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even) -> the latter.
    [1 + 2 ** -8, 'bf16', '0x3f80'], [1 + 3 * 2 ** -8, 'bf16', '0x3f82'],
    // Overflow: 65520 is halfway between 65504 (odd) and 2^16, rounds to 2^16 -> inf;
    // just below it stays at max. e4m3fn: 464 ties to 448 (even), 465 -> NaN.
    [65520, 'fp16', '0x7c00'], [65519, 'fp16', '0x7bff'], [464, 'e4m3fn', '0x7e'], [465, 'e4m3fn', '0x7f'],
    [61440, 'e5m2', '0x7c'], [3.5e38, 'fp32', '0x7f800000'],
    // Subnormals: fp32 2^-149 is the least; 2^-150 ties to 0 (even); 3*2^-151 rounds up.
    [2 ** -149, 'fp32', '0x00000001'], [2 ** -150, 'fp32', '0x00000000'], [3 * 2 ** -151, 'fp32', '0x00000001'],
    [2 ** -9, 'e4m3fn', '0x01'], [2 ** -16, 'e5m2', '0x01'], [2 ** -133, 'bf16', '0x0001'],
    [1 / 3, 'fp32', '0x3eaaaaab'], [0.1, 'fp16', '0x2e66'], [-1.5, 'e4m3fn', '0xbc'],
    // Hex floats and decimal strings as the API may send them.
    ['0x1.8p+3', 'fp32', '0x41400000'], ['-0x1p-1', 'fp16', '0xb800'], ['2.5', 'fp32', '0x40200000'],
    // tf32 in its fp32 container; MX fp6/fp4 saturate and have no NaN; e8m0; ints.
    [1, 'tf32', '0x3f800000'], [1 + 2 ** -11, 'tf32', '0x3f800000'], [7, 'fp4_e2m1', '0x7'], ['nan', 'e2m1', '0x0'],
    [-6, 'e2m1', '0xf'], [7.5, 'fp6_e2m3', '0x1f'], [1, 'e8m0', '0x7f'], [-2.5, 'int8', '0xfe'], [300, 'int8', '0x7f'],
    [-1, 'int32', '0xffffffff'],
  ];
  for (const [v, dt, want] of cases) assert.equal(bitsHex(v, dt), want, `${String(v)} in ${dt}`);
  assert.equal(bitFields(1, 'fp32'), '0 01111111 00000000000000000000000');
  assert.equal(bitFields(-0, 'e4m3fn'), '1 0000 000');
  assert.equal(bitsHex(1, 'nosuch'), null);
  assert.equal(bitsHex('garbage', 'fp32'), null);
  assert.equal(bitsHex(null, 'fp32'), null);
  // fp32 against the platform's own conversion (Float32Array rounds to nearest even).
  const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
  let x = 987654321;
  for (let i = 0; i < 20000; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    const y = (x / 2 ** 32 - 0.5) * 2 ** ((x % 300) - 150);
    f32[0] = y;
    assert.equal(encodeBits(y, 'fp32'), BigInt(u32[0]), `fp32 of ${y}`);
  }
});

test('csv: RFC 4180 quoting, CRLF records, full-precision numbers', async () => {
  const {csvField, toCsv} = await import('../../web/app/csv.js');
  assert.equal(csvField('plain'), 'plain');
  assert.equal(csvField('a,b'), '"a,b"');
  assert.equal(csvField('say "hi"'), '"say ""hi"""');
  assert.equal(csvField('two\nlines'), '"two\nlines"');
  assert.equal(csvField(null), '');
  assert.equal(csvField(2.233780888840556), '2.233780888840556');
  assert.equal(csvField(NaN), 'NaN');
  assert.equal(csvField([4, 4]), '"[4,4]"');
  assert.equal(toCsv(['a', 'b'], [[1, 'x,y'], [null, 'z']]), 'a,b\r\n1,"x,y"\r\n,z\r\n');
});

test('element-wise ULP histograms: the shapes read, and summing over cases', async () => {
  const {elementBins} = await import('../../web/app/charts.js');
  const {sumBins} = await import('../../web/app/views/job.js');
  assert.deepEqual(elementBins({edges: [0, 0.5, 1], counts: [3, 5, 2, 1], nonfinite: 0}),
    {labels: ['0', '≤0.5', '≤1', '>1', 'NaN/Inf'], counts: [3, 5, 2, 1, 0]});
  assert.deepEqual(elementBins([{le: 0.5, count: 7}, {le: 'inf', count: 1}]), {labels: ['≤0.5', 'inf'], counts: [7, 1]});
  assert.deepEqual(elementBins({bins: [{upper: 1, count: 2}]}), {labels: ['≤1'], counts: [2]});
  assert.deepEqual(elementBins({labels: ['a', 'b'], counts: [1, 2]}), {labels: ['a', 'b'], counts: [1, 2]});
  assert.equal(elementBins(undefined), null);
  assert.equal(elementBins({edges: [1], counts: ['x']}), null);
  const a = {labels: ['0', '≤1'], counts: [1, 2]}, b = {labels: ['0', '≤1'], counts: [3, 4]};
  assert.deepEqual(sumBins([a, b]), {labels: ['0', '≤1'], counts: [4, 6]});
  assert.equal(sumBins([a, null]), null);
  assert.equal(sumBins([a, {labels: ['0'], counts: [1]}]), null);
  assert.equal(sumBins([]), null);
  const {trimBins} = await import('../../web/app/charts.js');
  // The worker's fixed edges: empty buckets above the largest error go, the first
  // ones up to "≤1" and NaN/Inf stay; nothing counted is dropped.
  const w = elementBins({edges: [0, 0.125, 0.25, 0.5, 1, 2, 4], counts: [1, 0, 2, 0, 0, 0, 0, 0], nonfinite: 3});
  assert.deepEqual(trimBins(w), {labels: ['0', '≤0.125', '≤0.25', '≤0.5', '≤1', 'NaN/Inf'], counts: [1, 0, 2, 0, 0, 3]});
  const big = elementBins({edges: [0, 0.5, 1, 2, 4], counts: [0, 5, 0, 0, 7, 0], nonfinite: 0});
  assert.deepEqual(trimBins(big), {labels: ['0', '≤0.5', '≤1', '≤2', '≤4', 'NaN/Inf'], counts: [0, 5, 0, 0, 7, 0]});
  assert.deepEqual(trimBins({labels: ['a', 'b'], counts: [1, 0]}), {labels: ['a'], counts: [1]});
});

test('compare form: a reference is resolved as numvald does; defaults are newest and its predecessor', async () => {
  const {resolveBuild, comparePair} = await import('../../web/app/views/builds.js');
  // Newest first, as GET /builds lists them; 1.1 appears twice (the newest wins).
  const builds = [{id: 'c3', name: 'kernels', version: '1.2'}, {id: 'b2', name: 'kernels', version: '1.1'},
    {id: 'b1', name: 'kernels', version: '1.1'}, {id: 'a0', name: 'old', version: '1.0'}];
  assert.equal(resolveBuild(builds, 'a0').id, 'a0');
  assert.equal(resolveBuild(builds, '1.0').id, 'a0');
  assert.equal(resolveBuild(builds, '1.1').id, 'b2');
  assert.equal(resolveBuild(builds, 'old').id, 'a0');
  assert.equal(resolveBuild(builds, 'kernels').id, 'c3');
  assert.equal(resolveBuild(builds, 'nosuch'), null);
  assert.equal(resolveBuild(builds, ''), null);
  const p = comparePair(builds, {base: '1.0', head: '1.1'});
  assert.deepEqual([p.base.id, p.head.id], ['a0', 'b2']);
  const d = comparePair(builds, {});
  assert.deepEqual([d.base.id, d.head.id], ['b2', 'c3']);
  // Head given alone: base is the build before it.
  assert.equal(comparePair(builds, {head: 'b2'}).base.id, 'b1');
  const one = comparePair([{id: 'x'}], {});
  assert.deepEqual([one.base, one.head.id], [null, 'x']);
});

test('compare rows: each side\'s tolerance, and a changed limit (not a new version of the same one)', async () => {
  const {tolChanged, tolText} = await import('../../web/app/views/builds.js');
  const t = (max_ulp, version) => ({metric: 'ulp', max_ulp, reason_code: 'approximation_error', reason: 'r', version});
  assert.equal(tolText(t(0.5, 2)), '≤ 0.5 ULP (v2)');
  assert.equal(tolText(t(4, 0)), '≤ 4 ULP');
  assert.equal(tolText(undefined), '—');
  assert.equal(tolChanged({base: {tolerance: t(4, 1)}, head: {tolerance: t(0.5, 2)}}), true);
  assert.equal(tolChanged({base: {tolerance: t(1, 1)}, head: {tolerance: t(1, 2)}}), false);
  assert.equal(tolChanged({base: {tolerance: t(1, 1)}, head: {tolerance: {metric: 'allclose', atol: 1, rtol: 0}}}), true);
  assert.equal(tolChanged({base: {}, head: {tolerance: t(1, 1)}}), false);
});

test('history: points oldest first, failed ones marked, each linking to its case', async () => {
  const {historySeries, keyText} = await import('../../web/app/views/history.js');
  const pts = [
    {build_id: 'a', identity: {name: 'k', version: '1.0'}, verdict: 'passed', max_ulp: 0.5, case_id: 3,
      tolerance: {metric: 'ulp', max_ulp: 1}},
    {build_id: 'b', identity: {name: 'k', version: '1.1'}, verdict: 'failed', max_ulp: 3, case_id: 9,
      tolerance: {metric: 'ulp', max_ulp: 1}},
    {build_id: 'c', identity: {name: 'k', version: '1.2'}, verdict: 'failed', max_ulp: null, case_id: 12},
  ];
  const {metric, series, xTicks} = historySeries(pts);
  assert.equal(metric.key, 'max_ulp');
  assert.deepEqual(series[0].points.slice(0, 2), [[0, 0.5], [1, 3]]);
  assert.ok(Number.isNaN(series[0].points[2][1]));
  // A point without a value has no dot (its row in the table remains).
  assert.deepEqual(series[0].links.map((l) => [l.x, l.failed, l.href]), [[0, false, '#/cases/3'], [1, true, '#/cases/9']]);
  assert.match(series[0].links[1].label, /^k 1\.1: failed, max ULP error 3 \(case 9\)$/);
  assert.deepEqual(series[1].points.slice(0, 2), [[0, 1], [1, 1]]);
  assert.deepEqual(xTicks, [[0, '1.0'], [1, '1.1'], [2, '1.2']]);
  // Gradient cases: headroom, allowed 1.
  const g = historySeries([{build_id: 'a', verdict: 'passed', max_ulp: null, headroom: 0.2, case_id: 1}]);
  assert.equal(g.metric.key, 'headroom');
  assert.deepEqual(g.series[1].points, [[0, 1]]);
  assert.equal(keyText({op: 'exp', dtype: 'fp32', shape: '[257]', layout: 'contiguous', input: 'normal', device: 'emu0'}),
    'exp · fp32 · [257] · contiguous · normal · on emu0');
});

test('flaky rates: the rate as sent, else failed of runs', async () => {
  const {flakyRate, rateText} = await import('../../web/app/views/flaky.js');
  assert.equal(flakyRate({rate: 0.4}), 0.4);
  assert.equal(flakyRate({rate: 40}), 0.4);
  assert.equal(flakyRate({repro_rate: {runs: 5, failed: 2}}), 0.4);
  assert.equal(flakyRate({}), null);
  assert.equal(rateText({rate: 0.4, repro_rate: {runs: 5, failed: 2, bit_identical: 3}}), '40% (2 of 5 runs failed)');
});

test('field labels: no raw keys', async () => {
  const {fieldLabel, fieldTitle} = await import('../../web/app/views/common.js');
  assert.equal(fieldLabel('out_dtype'), 'output dtype');
  assert.equal(fieldLabel('nan_mismatches'), 'NaN mismatches');
  assert.equal(fieldTitle('out_dtype'), 'Output dtype');
  assert.equal(fieldTitle('minimized_artifact'), 'Minimized artifact');
  assert.equal(fieldLabel('graph_hash'), 'graph hash');
  assert.equal(fieldLabel('some_new_key'), 'some new key');
});

test('a case links its history under the key numvald keys it by', async () => {
  const {historyHref} = await import('../../web/app/views/case.js');
  const q = (s) => Object.fromEntries(new URLSearchParams(s.split('?')[1]));
  assert.deepEqual(q(historyHref({op: 'exp', dtype: 'fp32', shape: [257], layout: 'contiguous', input: 'normal',
    device: 'emu0'}, null)), {op: 'exp', dtype: 'fp32', shape: '[257]', layout: 'contiguous', input: 'normal', device: 'emu0'});
  // Gradient: the job's kind (the case has none); fused: the graph's name is the op.
  assert.deepEqual(q(historyHref({op: 'sigmoid', dtype: 'fp32', shape: [4, 8], input: 'normal', checks: {}, device: 'd'},
    {kind: 'gradient'})), {op: 'sigmoid', dtype: 'fp32', kind: 'gradient', shape: '[4,8]', input: 'normal', device: 'd'});
  assert.deepEqual(q(historyHref({op: 'fused', dtype: 'bf16', input: 'normal', device: 'f'},
    {kind: 'fused', spec: {name: 'attention-small'}})), {op: 'attention-small', dtype: 'bf16', kind: 'fused', input: 'normal', device: 'f'});
  assert.equal(q(historyHref({op: 'sigmoid', dtype: 'fp32', checks: {}}, null)).kind, 'gradient');
});

test('serving case: what its reproducer is and who took its greedy tokens', async () => {
  const {reproducerText, greedyText} = await import('../../web/app/views/serving.js');
  assert.equal(reproducerText({localized: {state: 'serving_pair', reason: 'node decoder.0.q'}}),
    'a serving pair (the node\'s op alone and in the batch): node decoder.0.q');
  assert.equal(reproducerText({localized: {state: 'op_case', reason: 'r'}}),
    'an op case of the first op that fails its tolerance: r');
  assert.equal(reproducerText({localized: {state: 'none', reason: 'why'}}), 'none: why');
  assert.equal(reproducerText({}), null);
  assert.equal(greedyText({argmax: 'device'}), 'the device\'s argmax op');
  assert.match(greedyText({argmax: 'kind'}), /does not offer the op/);
  assert.equal(greedyText({}), null);
});
