// Devices: state (with quarantine reason), backend, and what each declares: its
// dtype contract and numerical mode.

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
}
