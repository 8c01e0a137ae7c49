// Jobs list with filters (state, kind, device, build) and cursor paging. The
// filters live in the URL hash so a filtered list can be linked and bookmarked.

import {h, empty, qs} from '../util.js';
import {getJson, optional, poll} from '../api.js';
import {href} from '../router.js';
import {jobsTable, listOf, buildsOf} from './common.js';

const STATES = ['', 'queued', 'leased', 'running', 'passed', 'failed', 'error', 'cancelled'];
const KINDS = ['', 'op', 'gradient', 'fused', 'longrun', 'suite'];

function select(name, label, values, current, labels) {
  const id = `f-${name}`;
  return h('div.field', h('label', {for: id}, label),
    h('select', {id, name}, values.map((v) => h('option', {value: v, selected: v === (current || '')},
      labels && labels[v] ? labels[v] : v || 'any'))));
}

export async function renderJobs(ctx) {
  document.title = 'Jobs · numval';
  const {main, query} = ctx;
  const [devices, builds] = await Promise.all([optional('/devices'), optional('/builds')]);
  const devNames = ['', ...listOf(devices, 'devices').map((d) => d.name)];
  if (query.device && !devNames.includes(query.device)) devNames.push(query.device);
  const buildList = buildsOf(builds);
  const buildIds = ['', ...buildList.map((b) => String(b.id))];
  const buildLabels = Object.fromEntries(buildList.map((b) =>
    [String(b.id), `${b.name || b.id}${b.version ? ' ' + b.version : ''}`]));
  if (query.build && !buildIds.includes(query.build)) buildIds.push(query.build);

  const form = h('form.filters', {role: 'search', 'aria-label': 'Filter jobs'},
    select('state', 'State', STATES, query.state),
    select('kind', 'Kind', KINDS, query.kind),
    select('device', 'Device', devNames, query.device),
    select('build', 'Build', buildIds, query.build, buildLabels),
    select('limit', 'Per page', ['25', '50', '100', '200'], query.limit || '50'),
    h('div.field.actions', h('button', {type: 'submit'}, 'Apply'),
      h('a.button.secondary', {href: '#/jobs'}, 'Reset')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = Object.fromEntries(new FormData(form));
    if (f.limit === '50') delete f.limit;
    location.hash = href('/jobs', f);
  });
  form.addEventListener('change', () => form.requestSubmit());

  const params = {state: query.state, kind: query.kind, device: query.device, build: query.build,
    limit: query.limit || 50, cursor: query.cursor};
  const path = '/jobs' + qs(params);
  const body = await getJson(path, {track: true});
  const box = h('div');
  const pager = h('nav.pager', {'aria-label': 'Pages'});
  function draw(data) {
    const jobs = listOf(data, 'jobs');
    box.replaceChildren(jobs.length ? jobsTable(jobs, {buildNames: buildLabels}) : empty('No jobs match these filters.'));
    const base = {...query};
    delete base.cursor;
    pager.replaceChildren(...[
      query.cursor ? h('a.button.secondary', {href: href('/jobs', base)}, '« First page') : null,
      query.cursor ? h('button.secondary', {type: 'button', onclick: () => history.back()}, '‹ Previous') : null,
      data.next_cursor
        ? h('a.button', {href: href('/jobs', {...base, cursor: data.next_cursor}), rel: 'next'}, 'Next page ›')
        : h('span.muted', query.cursor ? 'Last page.' : ''),
    ].filter(Boolean));
  }
  draw(body);
  main.append(h('h1', 'Jobs'), form, box, pager);
  // Only the first page moves; later pages are a stable cursor window.
  if (!query.cursor) ctx.onLeave(poll(path, 3000, draw));
}
