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
