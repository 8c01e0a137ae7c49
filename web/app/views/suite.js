// The permanent suite of promoted reproducers: signature, origin,
// first failing build, fixed in, occurrences; retiring one needs a reason.

import {h, num, when, section, empty, shortId, badge} from '../util.js';
import {optional, post} from '../api.js';
import {writeAction} from '../auth.js';
import {go} from '../router.js';
import {listOf} from './common.js';

function retireForm(sc) {
  const status = h('span.action-status', {'aria-live': 'polite'});
  const id = `retire-${sc.id}`;
  const input = h('input', {id, name: 'reason', placeholder: 'reason', size: 14});
  const f = h('form.inline', h('label.sr-only', {for: id}, `Reason to retire suite case ${sc.id}`), input,
    h('button.small.danger', {type: 'submit'}, 'Retire'), status);
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await writeAction(`Retire suite case ${sc.id}`, () =>
      post(`/suite/${encodeURIComponent(sc.id)}/retire`, {reason: input.value}), status);
    if (r) go(location.hash);
  });
  return f;
}

function buildText(b) {
  if (!b) return '—';
  if (typeof b !== 'object') return shortId(b, 14);
  const label = [b.name, b.version && b.version !== b.name ? b.version : null].filter(Boolean).join(' ');
  return h('span', {title: b.hash || ''}, label || shortId(b.hash, 14));
}

function signatureCell(sc) {
  const d = sc.signature_detail;
  return h('td', h('code', {title: sc.signature}, shortId(sc.signature, 16)),
    h('div.muted', `${sc.op || d?.op || '?'} · ${sc.dtype || d?.dtype || '?'} · ${sc.failure_class || d?.failure_class || '?'}`),
    d ? h('details', h('summary', 'what it hashes'), h('pre.json', JSON.stringify(d, null, 2))) : null);
}

function originCell(sc) {
  if (sc.origin_job == null) return h('td', '—');
  const q = sc.origin_case != null ? `?index=${encodeURIComponent(sc.origin_case)}` : '';
  return h('td', h('a', {href: `#/jobs/${encodeURIComponent(sc.origin_job)}${q}`}, `job #${sc.origin_job}`),
    sc.origin_case != null ? `, case ${sc.origin_case}` : '', sc.device ? h('div.muted', `on ${sc.device}`) : null);
}

export async function renderSuite(ctx) {
  document.title = 'Permanent suite · numval';
  const {main, query} = ctx;
  main.append(h('h1', 'Permanent suite'));
  const state = query.state === 'retired' ? 'retired' : query.state === 'all' ? '' : 'active';
  const tabs = h('p.filters', {id: 'suite-state'}, ['active', 'retired', 'all'].map((s) =>
    h('a', {href: `#/suite?state=${s}`, 'aria-current': (state || 'all') === s ? 'page' : null, style: 'margin-right:1em'}, s)));
  main.append(tabs);
  const body = await optional('/suite' + (state ? `?state=${state}` : ''));
  if (body === null) {
    main.append(section('Suite cases', empty('No data yet: this server has no permanent suite.')));
    return;
  }
  const list = listOf(body, 'suite').concat(listOf(body, 'cases'));
  if (!list.length) {
    main.append(section('Suite cases', empty(state === 'retired' ? 'No retired suite cases.' : 'No reproducers promoted yet.')));
    return;
  }
  main.append(section('Suite cases', h('p.muted', 'A failure whose minimized reproducer has a new signature is promoted ',
    'here; the same signature again only counts an occurrence. Suite jobs replay the active cases on a device.'),
  h('div.table-wrap', h('table.data', {id: 'suite'},
    h('thead', h('tr', ['Case', 'State', 'Signature', 'Origin', 'First failing build', 'Fixed in', 'Occurrences',
      'Last replay', 'Promoted', 'Retire'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((sc) => h('tr', {dataset: {suiteCase: sc.id, state: sc.state || ''}},
      h('td', String(sc.id)),
      h('td', badge(sc.state || 'active'),
        sc.retire_reason ? h('div.reason', sc.retire_reason, h('span.muted', ` (${when(sc.retired_at)})`)) : null),
      signatureCell(sc),
      originCell(sc),
      h('td', buildText(sc.first_failing_build)),
      h('td', buildText(sc.fixed_in_build)),
      h('td.num', num(sc.occurrences)),
      h('td', sc.last_verdict ? [badge(sc.last_verdict), h('span.muted', ` of ${num(sc.runs)} run(s)`)] : '—'),
      h('td', when(sc.created_at)),
      h('td', sc.state === 'retired' ? '—' : retireForm(sc)))))))));
}
