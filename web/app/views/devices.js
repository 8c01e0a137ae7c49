// Devices: state (with quarantine reason), backend, and what each declares: its
// dtype contract and numerical mode; beside it the contract its newest contract
// job measured.

import {h, num, when, section, empty, kv} from '../util.js';
import {optional} from '../api.js';
import {deviceState, listOf} from './common.js';

// Renders a nested JSON object as definition lists (contracts are small trees).
function tree(v) {
  if (v === null || v === undefined) return '—';
  if (Array.isArray(v)) {
    if (v.every((x) => typeof x !== 'object' || x === null)) return v.join(', ');
    return h('ol', v.map((x) => h('li', tree(x))));
  }
  if (typeof v === 'object') return kv(Object.entries(v).map(([k, x]) => [k, tree(x)]));
  return String(v);
}

function flatten(o, prefix = '', out = {}) {
  for (const [k, v] of Object.entries(o || {})) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v)) flatten(v, key, out);
    else out[key] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

// The dtype contract as one table: a row per dtype, a column per (flattened) property.
function contractTable(contract) {
  if (!contract || typeof contract !== 'object' || Array.isArray(contract)) return tree(contract);
  const rows = Object.entries(contract).filter(([, v]) => v && typeof v === 'object');
  if (!rows.length) return tree(contract);
  const flat = rows.map(([dt, v]) => [dt, flatten(v)]);
  const cols = [...new Set(flat.flatMap(([, f]) => Object.keys(f)))];
  return h('div.table-wrap', h('table.data.contract',
    h('thead', h('tr', h('th', {scope: 'col'}, 'dtype'), cols.map((c) => h('th', {scope: 'col'}, c)))),
    h('tbody', flat.map(([dt, f]) => h('tr', h('th', {scope: 'row'}, dt),
      cols.map((c) => h(typeof f[c] === 'number' ? 'td.num' : 'td',
        f[c] === undefined ? '—' : typeof f[c] === 'number' ? num(f[c]) : String(f[c]))))))));
}

// The judged field names that are not measured.contract's keys (worker/kinds/contract/judge.c).
const JUDGED_ALIAS = {
  'matmul_accumulator': 'matmul_accumulation',
  'reduction_order(matmul)': 'matmul_reduction_order',
  'deterministic(sum)': 'deterministic',
  'deterministic(matmul)': 'matmul_deterministic',
};

function byField(list, dt) {
  const out = {};
  for (const e of list || []) {
    const f = String(e.field || '');
    const pre = `contract.${dt}.`;
    if (!f.startsWith(pre)) continue;
    const name = f.slice(pre.length);
    out[JUDGED_ALIAS[name] || name] = e;
  }
  return out;
}

const text = (v) => (v === undefined || v === null ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

// The measured contract (GET /api/v1/devices/{name}/contract): a row per dtype and
// field, describe()'s value where the contract job judged it, and the verdict.
function measuredTable(c) {
  const rows = [];
  for (const [dt, fields] of Object.entries(c.measured || {})) {
    const judged = byField(c.judged || c.mismatches, dt), bad = byField(c.mismatches, dt);
    for (const [k, v] of Object.entries(flatten(fields))) {
      const j = judged[k];
      const verdict = bad[k] ? 'mismatch' : j ? 'agrees' : 'not judged';
      rows.push(h(`tr.${verdict.replace(' ', '-')}`, h('th', {scope: 'row'}, dt), h('td', k),
        h('td', j ? text(j.declared) : '—'), h('td', text(v)),
        h(bad[k] ? 'td.bad' : 'td', bad[k] ? h('strong', 'MISMATCH') : verdict)));
    }
  }
  return h('div.measured-contract',
    h('p', `Contract job `, h('a', {href: `#/jobs/${c.job_id}`}, `#${c.job_id}`),
      ` (${c.state}), finished `, when(c.finished_at),
      `: ${(c.mismatches || []).length} of ${(c.judged || []).length} judged fields contradict describe().`),
    h('div.table-wrap', h('table.data.measured',
      h('thead', h('tr', ['dtype', 'field', 'declared', 'measured', 'verdict'].map((x) => h('th', {scope: 'col'}, x)))),
      h('tbody', rows))));
}

function pick(d, ...keys) {
  for (const k of keys) {
    const path = k.split('.');
    let v = d;
    for (const p of path) v = v && typeof v === 'object' ? v[p] : undefined;
    if (v !== undefined && v !== null) return v;
  }
  return undefined;
}

function deviceCard(d) {
  const contract = pick(d, 'contract', 'dtype_contract', 'describe.contract');
  const mode = pick(d, 'mode', 'numerical_mode', 'describe.mode');
  const identity = pick(d, 'describe.device', 'identity');
  return h('article.card.device', {id: `device-${d.name}`, 'aria-labelledby': `dev-h-${d.name}`},
    h('h2', {id: `dev-h-${d.name}`}, d.name, ' ', deviceState(d)),
    kv([
      ['Backend', d.backend ? h('code', d.backend) : undefined],
      ['Slots', d.slots !== undefined ? num(d.slots) : undefined],
      ['Local (spawned by numvald)', d.local !== undefined ? (d.local ? 'yes' : 'no (remote worker)') : undefined],
      ['Restarts', d.restarts !== undefined ? num(d.restarts) : undefined],
      ['Quarantine reason', d.quarantine_reason || undefined],
      ['Last crash', d.last_crash_reason || d.last_crash || undefined],
      ['Last seen', d.last_seen || d.last_heartbeat ? when(d.last_seen || d.last_heartbeat) : undefined],
      ['Identity', identity ? (typeof identity === 'object' ? tree(identity) : String(identity)) : undefined],
    ]),
    h('h3', 'Numerical mode'), mode ? h('div.mode', tree(mode)) : empty('Not reported yet (reported by the worker when it first runs a job).'),
    h('h3', 'Dtype contract'), contract ? contractTable(contract) : empty('Not reported yet.'),
    h('h3', 'Measured contract'), h('div', {id: `measured-${d.name}`}, empty('Loading…')),
    d.describe ? h('details', h('summary', 'Full describe() as reported'),
      h('pre.json', JSON.stringify(d.describe, null, 2))) : null,
    h('p', h('a', {href: `#/jobs?device=${encodeURIComponent(d.name)}`}, `Jobs on ${d.name}`)));
}

export async function renderDevices(ctx) {
  document.title = 'Devices · numval';
  const {main, query} = ctx;
  const body = await optional('/devices');
  let devices = listOf(body, 'devices');
  main.append(h('h1', 'Devices'));
  if (query.name) {
    devices = devices.filter((d) => d.name === query.name);
    main.append(h('p', h('a', {href: '#/devices'}, 'All devices')));
  }
  if (!devices.length) {
    main.append(section('Devices', empty(query.name ? `No device named "${query.name}".` : 'No devices registered yet.')));
    return;
  }
  main.append(...devices.map(deviceCard));
  // Each device's newest measured contract, beside the declared one (404: none yet).
  await Promise.all(devices.map(async (d) => {
    const c = await optional(`/devices/${encodeURIComponent(d.name)}/contract`);
    const slot = document.getElementById(`measured-${d.name}`);
    if (!slot) return;
    slot.replaceChildren(c ? measuredTable(c)
      : empty('No finished contract job yet (submit {"kind": "contract"} to this device; docs/CONTRACT.md).'));
  }));
}
