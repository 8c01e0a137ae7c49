// The permanent suite of promoted reproducers (issue 6): signature, origin,
// first failing build, fixed in, occurrences; retiring one needs a reason.

import {h, num, when, section, empty, shortId, badge} from '../util.js';
import {optional, post} from '../api.js';
import {writeAction} from '../auth.js';
import {go} from '../router.js';
import {listOf} from './common.js';

function retireForm(sc) {
  const status = h('span.action-status', {'aria-live': 'polite'});
  const id = `retire-${sc.id}`;
  const input = h('input', {id, name: 'reason', placeholder: 'reason'});
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

export async function renderSuite(ctx) {
  document.title = 'Permanent suite · numval';
  const {main} = ctx;
  main.append(h('h1', 'Permanent suite'));
  const body = await optional('/suite');
  if (body === null) {
    main.append(section('Suite cases', empty('No data yet: this server has no permanent suite.')));
    return;
  }
  const list = listOf(body, 'cases').concat(listOf(body, 'suite'));
  if (!list.length) {
    main.append(section('Suite cases', empty('No reproducers promoted yet.')));
    return;
  }
  main.append(section('Suite cases', h('div.table-wrap', h('table.data', {id: 'suite'},
    h('thead', h('tr', ['Case', 'State', 'Signature', 'Origin', 'First failing build', 'Fixed in', 'Occurrences', 'Promoted', 'Retire']
      .map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', list.map((sc) => h('tr',
      h('td', String(sc.id)),
      h('td', badge(sc.state || (sc.retired ? 'retired' : 'active')),
        sc.retire_reason ? h('span.reason', ' ', sc.retire_reason) : null),
      h('td', h('code', {title: sc.signature}, shortId(sc.signature, 24))),
      h('td', sc.origin_case ?? sc.case_id ? h('a', {href: `#/cases/${encodeURIComponent(sc.origin_case ?? sc.case_id)}`},
        `case ${sc.origin_case ?? sc.case_id}`) : (sc.origin_job ? h('a', {href: `#/jobs/${sc.origin_job}`}, `job #${sc.origin_job}`) : '—')),
      h('td', shortId(sc.first_failing_build ?? sc.origin_build ?? '—', 14)),
      h('td', shortId(sc.fixed_in ?? sc.fixed_in_build ?? '—', 14)),
      h('td.num', num(sc.occurrences)),
      h('td', when(sc.created_at || sc.promoted_at)),
      h('td', sc.retired || sc.state === 'retired' ? '—' : retireForm(sc)))))))));
}
