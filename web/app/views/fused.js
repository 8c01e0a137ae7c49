// Fused case: the graph in topological order with per-node error of the fused and
// unfused executions, the first divergent node highlighted. Shown only when the
// case carries node data (issue 5); returns null otherwise.

import {h, num, section, badge} from '../util.js';

function nodesOf(c) {
  if (Array.isArray(c.nodes)) return c.nodes;
  if (c.graph && Array.isArray(c.graph.nodes)) return c.graph.nodes;
  return null;
}

function nodeName(n, i) { return n.name ?? n.id ?? `n${i}`; }

function errOf(n, which) {
  const e = n[which];
  if (e === undefined || e === null) return n[`${which}_max_ulp`] ?? n[`${which}_ulp`];
  return typeof e === 'object' ? (e.max_ulp ?? e.max_abs ?? e.error) : e;
}

export function fusedSection(c) {
  const nodes = nodesOf(c);
  if (!nodes || !nodes.length) return null;
  const first = c.first_divergent ?? c.first_divergent_node ??
    (c.graph && (c.graph.first_divergent ?? c.graph.first_divergent_node));
  const firstName = first && typeof first === 'object' ? (first.name ?? first.id) : first;
  const list = h('ol.graph', {id: 'fused-graph'}, nodes.map((n, i) => {
    const name = nodeName(n, i);
    const div = firstName !== undefined && String(name) === String(firstName);
    const ins = (n.inputs || []).map((x) => (typeof x === 'object' ? (x.name ?? x.id) : x));
    return h('li', {class: div ? 'divergent' : null, 'aria-current': div ? 'true' : null},
      h('strong', String(name)), ' = ', h('code', n.op || '?'), '(', ins.join(', '), ')',
      div ? h('span.tag.bad', ' first divergent node') : null,
      h('span.node-err', ' fused ', num(errOf(n, 'fused')), ' · unfused ', num(errOf(n, 'unfused')),
        n.verdict ? [' ', badge(n.verdict)] : null));
  }));
  return section('Fused graph', h('p', firstName !== undefined
    ? ['First divergent node: ', h('strong.bad', String(firstName)), ' (its inputs were still within tolerance).']
    : 'No node diverged.'), list);
}
