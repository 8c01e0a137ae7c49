// Fused case (docs/JOBS.md "Fused jobs" → "Result"): the graph as layers in
// topological order (graph inputs first, each node one layer after the deepest
// value it reads), the first divergent node highlighted, and per node its own
// (local) error of the fused execution against its tolerance, plus the
// end-to-end error of the fused and the unfused execution. Returns null for a
// case without "nodes".

import {h, num, section, badge} from '../util.js';
import {tolMetric} from './common.js';

const STATE_TEXT = {
  within_tolerance: 'within tolerance',
  diverged: 'diverged',
  diverged_after_input: 'diverged after an input did',
};

// Layer of every value: graph inputs 0, a node 1 + the deepest value it reads.
// The nodes arrive in topological order, so one pass suffices.
export function fusedLayers(nodes) {
  const depth = new Map();
  const inputs = [];
  for (const n of nodes) {
    let d = 0;
    for (const x of n.inputs || []) {
      if (!depth.has(x)) {
        depth.set(x, 0);
        inputs.push(x);
      }
      d = Math.max(d, depth.get(x) + 1);
    }
    depth.set(n.name, d);
  }
  const layers = [inputs.map((name) => ({name, input: true}))];
  for (const n of nodes) {
    const d = depth.get(n.name);
    while (layers.length <= d) layers.push([]);
    layers[d].push(n);
  }
  return layers.filter((l) => l.length);
}

function local(n) { return (n.fused && n.fused.local) || {}; }
function e2e(n, which) { return (n[which] && n[which].end_to_end) || {}; }

function nodeCard(n, firstName) {
  if (n.input) {
    return h('li.gnode.ginput', {dataset: {node: n.name}}, h('strong', n.name), h('span.muted', ' graph input'));
  }
  const first = n.name === firstName;
  const l = local(n);
  return h('li', {class: `gnode s-${n.state || 'unknown'}${first ? ' divergent' : ''}`,
    dataset: {node: n.name, state: n.state || ''}, 'aria-current': first ? 'true' : null},
  h('strong', n.name), ' = ', h('code', n.op || '?'), h('span.muted', ` ${n.dtype || ''}`),
  n.output ? h('span.tag', ' output') : null,
  h('div.gin', '← ', (n.inputs || []).join(', ') || '—'),
  h('div', 'local ', h('b', num(l.max_ulp)), ' ULP', n.tolerance ? [' of ', tolMetric(n.tolerance)] : null),
  first ? h('div.tag.bad', 'first divergent node') : h('div.muted', STATE_TEXT[n.state] || n.state || ''));
}

function nodeTable(nodes, firstName) {
  return h('div.table-wrap', h('table.data', {id: 'fused-nodes'},
    h('caption', 'Per node, in topological order'),
    h('thead', h('tr', ['Node', 'Reads', 'Op · dtype', 'State', 'Fused local max ULP (held in)', 'Tolerance',
      'Headroom', 'Fused end-to-end max ULP', 'Unfused end-to-end max ULP'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', nodes.map((n) => {
      const l = local(n), f = e2e(n, 'fused'), u = e2e(n, 'unfused');
      const first = n.name === firstName;
      return h('tr', {class: first ? 'divergent' : null, dataset: {node: n.name, state: n.state || ''}},
        h('th', {scope: 'row'}, n.name, first ? h('span.tag.bad', ' first divergent') : null),
        h('td', (n.inputs || []).join(', ')),
        h('td', h('code', n.op || '?'), ` · ${n.dtype || '—'}`),
        h('td', badge(n.state || 'unknown')),
        h('td.num', num(l.max_ulp), l.dtype ? h('span.muted', ` (${l.dtype})`) : null),
        h('td', n.tolerance ? tolMetric(n.tolerance) : '—'),
        h('td.num', num(l.headroom)),
        h('td.num', num(f.max_ulp)),
        h('td.num', num(u.max_ulp)));
    }))));
}

export function fusedSection(c) {
  const nodes = Array.isArray(c.nodes) ? c.nodes : null;
  if (!nodes || !nodes.length) return null;
  const fd = c.first_divergent && typeof c.first_divergent === 'object' ? c.first_divergent : null;
  const firstName = fd ? fd.node : undefined;
  const layers = fusedLayers(nodes);
  const diagram = h('ol.graph-layers', {id: 'fused-graph', 'aria-label': 'Graph layers, inputs first'},
    layers.map((layer, i) => h('li.glayer', h('span.sr-only', `Layer ${i}`),
      h('ul', layer.map((n) => nodeCard(n, firstName))))));
  const head = fd
    ? h('p', {id: 'first-divergent'}, 'First divergent node: ', h('strong.bad', fd.node), ' (', h('code', fd.op || '?'),
      `, ${fd.execution || 'fused'} execution, judged in ${fd.dtype || '?'}): max `, h('b', num(fd.max_ulp)),
      ' ULP, ', num(fd.mismatches), ' mismatching elements, headroom ', num(fd.headroom),
      '; end-to-end fused ', num(fd.end_to_end_max_ulp), ' vs unfused ', num(fd.unfused_end_to_end_max_ulp),
      ' ULP. Every value it reads was within its tolerance.')
    : h('p', {id: 'first-divergent'}, 'No node diverged: every node was within its tolerance.');
  const summary = h('p.muted', 'Graph outputs: fused end-to-end max ', num(c.max_ulp), ' ULP / max abs ', num(c.max_abs),
    '; unfused max abs ', num(c.unfused_max_abs),
    c.fused_le_unfused === undefined ? '' : `; fused ≤ unfused: ${c.fused_le_unfused ? 'yes' : 'no'}`,
    c.graph_hash ? ['; graph ', h('code', String(c.graph_hash).slice(0, 12))] : '', '.');
  return section('Fused graph', head, summary, diagram, nodeTable(nodes, firstName),
    h('p.muted', 'Local error: the node judged on the values the fused execution fed it (an upstream error is not ',
      'charged again). End-to-end: against the exact graph reference, reported, not judged.'));
}
