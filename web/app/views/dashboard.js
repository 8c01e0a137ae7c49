// Dashboard: queue depth, devices, regressions of the latest build against its
// predecessor, latest builds with pass/fail counts, recent failures. Polls with
// ETags and redraws only what changed.

import {h, clear, num, when, badge, empty, errorBox, section, shortId} from '../util.js';
import {getJson, get, optional, poll, ApiError} from '../api.js';
import {href} from '../router.js';
import {jobsTable, deviceState, listOf, buildsOf} from './common.js';
import {matchText, buildLabel} from './builds.js';

const REG_ROWS = 10;

const POLL_MS = 2000;
// Initial loads remember their bodies so the first poll does not redraw unchanged data.
const T = {track: true};

function countLabel(body) {
  const n = listOf(body, 'jobs').length;
  return body && body.next_cursor ? `${n}+` : String(n);
}

// numvald's Prometheus text (GET /metrics): queue depth and jobs by state.
export function parseMetrics(text) {
  const out = {jobs: {}};
  if (typeof text !== 'string') return out;
  for (const line of text.split('\n')) {
    let m = /^numvald_queue_depth\s+(\S+)/.exec(line);
    if (m) out.queue_depth = Number(m[1]);
    m = /^numvald_jobs\{state="(\w+)"\}\s+(\S+)/.exec(line);
    if (m) out.jobs[m[1]] = Number(m[2]);
    m = /^numvald_claims_waiting\s+(\S+)/.exec(line);
    if (m) out.claims_waiting = Number(m[1]);
  }
  return out;
}

function queueCard(queued, running, health, metrics) {
  const mt = parseMetrics(metrics);
  const depth = mt.queue_depth;
  const byState = ['passed', 'failed', 'error', 'cancelled'].filter((s) => mt.jobs[s] !== undefined);
  return h('div.stats',
    h('div.stat', h('span.stat-n', {id: 'queue-depth'},
      depth !== undefined ? num(depth) : countLabel(queued)), h('span', 'queued')),
    h('div.stat', h('span.stat-n', {id: 'running-count'},
      mt.jobs.running !== undefined ? num(mt.jobs.running + (mt.jobs.leased || 0)) : countLabel(running)),
    h('span', 'running')),
    mt.claims_waiting !== undefined
      ? h('div.stat', h('span.stat-n', num(mt.claims_waiting)), h('span', 'idle workers waiting')) : null,
    byState.map((s) => h('div.stat', h('span.stat-n', num(mt.jobs[s])),
      h('a', {href: `#/jobs?state=${s}`}, `${s} jobs`))),
    health && health.status ? h('div.stat', h('span.stat-n', health.status),
      h('span', `numvald ${health.version || ''}`)) : null);
}

function devicesTable(devices) {
  if (!devices.length) return empty('No devices registered yet.');
  return h('div.table-wrap', h('table.data', {id: 'dash-devices'},
    h('thead', h('tr', ['Device', 'State', 'Backend', 'Slots'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', devices.map((d) => h('tr',
      h('td', h('a', {href: `#/devices?name=${encodeURIComponent(d.name)}`}, d.name)),
      h('td', deviceState(d)),
      h('td', h('code', d.backend || '—')),
      h('td.num', num(d.slots)))))));
}

// Pass/fail per build: from the build's own counts when the API has them, else
// summed over its most recent jobs (labelled as such).
async function buildRows(builds) {
  const rows = [];
  for (const b of builds.slice(0, 5)) {
    let passed = b.cases_passed ?? b.passed, failed = b.cases_failed ?? b.failed, note = '';
    if (passed === undefined || failed === undefined) {
      const jobs = await getJson(`/jobs?build=${encodeURIComponent(b.id)}&limit=100`);
      const list = listOf(jobs, 'jobs');
      passed = list.reduce((a, j) => a + (j.cases_passed || 0), 0);
      failed = list.reduce((a, j) => a + (j.cases_failed || 0), 0);
      if (jobs.next_cursor) note = ' (latest 100 jobs)';
    }
    rows.push(h('tr',
      h('td', h('a', {href: `#/jobs?build=${encodeURIComponent(b.id)}`}, b.name || shortId(b.id))),
      h('td', b.version || '—'),
      h('td', h('code', shortId(b.commit || '', 10) || '—')),
      h('td.num', num(passed)),
      h('td.num', failed ? h('strong.bad', num(failed)) : num(failed), note),
      h('td', when(b.created_at))));
  }
  return rows;
}

// Newly failing cases of the newest build (GET /builds lists newest first) against
// the build before it, from GET /compare. Returns {key, node}: key is what the
// content depends on, so an unchanged answer is not redrawn under the user's focus.
async function regressions(builds) {
  if (builds.length < 2) {
    return {key: `n${builds.length}`, node: empty(`Regressions compare the newest build with the one before it: ` +
      `needs two builds; ${builds.length} registered.`)};
  }
  const [head, base] = builds;
  const cmp = href('/compare', {base: base.id, head: head.id});
  const intro = h('p', {id: 'dash-reg-pair'}, h('strong', buildLabel(head)), ' against its predecessor ',
    h('strong', buildLabel(base)), ' · ', h('a', {href: cmp}, 'full compare'));
  let r;
  try {
    const res = await get(`/compare?base=${encodeURIComponent(base.id)}&head=${encodeURIComponent(head.id)}`, {track: true});
    r = res.data;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    const msg = e.status === 404 ? 'This server has no build compare (GET /api/v1/compare answered 404).'
      : e.status === 413 ? `Too many cases to compare here (${e.message}); narrow it on the compare page.`
        : `Compare failed: ${e.message}`;
    return {key: `e${head.id}${base.id}${e.status}`, node: h('div', intro, h('p.muted', msg))};
  }
  const list = Array.isArray(r.newly_failing) ? r.newly_failing : [];
  const cnt = r.counts || {};
  const total = cnt.newly_failing ?? list.length;
  const key = JSON.stringify([head.id, base.id, list.map((x) => x.head && x.head.case_id), total, cnt.matched]);
  if (cnt.matched === 0) {
    return {key, node: h('div', intro, h('p', {id: 'dash-reg-none'}, 'None: no case of the newest build matches one of its ' +
      'predecessor, so nothing was compared.'))};
  }
  if (!list.length) {
    return {key, node: h('div', intro, h('p', {id: 'dash-reg-none'},
      `None: no case newly fails (${num(cnt.matched)} matched cases compared).`))};
  }
  const shown = list.slice(0, REG_ROWS);
  return {key, node: h('div', intro, h('div.table-wrap', h('table.data', {id: 'dash-regressions'},
    h('caption', `${num(total)} newly failing case${total === 1 ? '' : 's'} of ${num(cnt.matched)} matched` +
      (total > shown.length ? `; the first ${shown.length}` : '')),
    h('thead', h('tr', ['Case', 'Base', 'Head'].map((t) => h('th', {scope: 'col'}, t)))),
    h('tbody', shown.map((x) => {
      const hc = x.head || {}, bc = x.base || {};
      const err = (c) => (c.max_ulp !== undefined ? `${num(c.max_ulp)} ULP` : `headroom ${num(c.headroom)}`);
      return h('tr', {dataset: {verdict: 'failed'}},
        h('td', hc.case_id != null ? h('a', {href: `#/cases/${encodeURIComponent(hc.case_id)}`}, matchText(x.match))
          : matchText(x.match)),
        h('td', badge(bc.verdict || 'unknown'), ' ', err(bc)),
        h('td', badge(hc.verdict || 'unknown'), ' ', err(hc), hc.failure_class ? h('span.muted', ` ${hc.failure_class}`) : null));
    })))),
  total > shown.length ? h('p', h('a', {href: cmp}, `All ${num(total)} newly failing cases`)) : null)};
}

export async function renderDashboard(ctx) {
  document.title = 'Dashboard · numval';
  const {main} = ctx;
  const live = h('p.live', {'aria-live': 'polite'}, 'Live: updates every 2 s.');
  const queueBox = h('div');
  const devBox = h('div');
  const buildBox = h('div');
  const regBox = h('div', {id: 'dash-reg'});
  const failBox = h('div');
  const runBox = h('div');
  main.append(h('h1', 'Dashboard'), live,
    section('Queue', queueBox),
    section('Devices', devBox),
    section('Running jobs', runBox),
    section('Regressions of the latest build', regBox),
    section('Latest builds', buildBox),
    section('Recent failures', failBox));

  const state = {};
  let regKey = null;
  const names = () => Object.fromEntries(buildsOf(state.builds).map((b) =>
    [b.id, `${b.name || shortId(b.id)}${b.version ? ' ' + b.version : ''}`]));
  async function draw(which) {
    try {
      if (which.queue) {
        clear(queueBox).append(queueCard(state.queued, state.running, state.health, state.metrics));
        const running = listOf(state.running, 'jobs');
        clear(runBox).append(running.length ? jobsTable(running, {buildNames: names()}) : empty('Nothing running.'));
      }
      if (which.devices) clear(devBox).append(devicesTable(listOf(state.devices, 'devices')));
      if (which.builds) {
        const builds = buildsOf(state.builds);
        clear(buildBox).append(builds.length
          ? h('div.table-wrap', h('table.data', {id: 'dash-builds'},
            h('thead', h('tr', ['Build', 'Version', 'Commit', 'Cases passed', 'Cases failed', 'Seen']
              .map((t) => h('th', {scope: 'col'}, t)))),
            h('tbody', await buildRows(builds))))
          : empty('No builds recorded yet.'));
        const reg = await regressions(builds);
        if (reg.key !== regKey) {
          regKey = reg.key;
          clear(regBox).append(reg.node);
        }
      }
      if (which.failures) {
        const fails = listOf(state.failures, 'jobs');
        clear(failBox).append(fails.length
          ? jobsTable(fails, {caption: 'Latest failed jobs', buildNames: names()})
          : empty('No failed jobs.'));
      }
    } catch (e) {
      live.replaceChildren(errorBox(e));
    }
  }

  const sources = {
    queued: ['/jobs?state=queued&limit=100', 'queue'],
    running: ['/jobs?state=running&limit=50', 'queue'],
    devices: ['/devices', 'devices'],
    builds: ['/builds', 'builds'],
    failures: ['/jobs?state=failed&limit=10', 'failures'],
    metrics: ['!metrics', 'queue'],
  };
  const [queued, running, devices, builds, failures, health, metrics] = await Promise.all([
    getJson(sources.queued[0], T), getJson(sources.running[0], T), optional(sources.devices[0], T),
    optional(sources.builds[0], T), getJson(sources.failures[0], T),
    fetch(new URL('healthz', document.baseURI), {headers: {Accept: 'application/json'}})
      .then((r) => (r.ok ? r.json() : null)).catch(() => null),
    optional('!metrics', T).catch(() => null),
  ]);
  Object.assign(state, {queued, running, devices, builds, failures, health, metrics});
  await draw({queue: true, devices: true, builds: true, failures: true});

  for (const [key, [path, part]] of Object.entries(sources)) {
    ctx.onLeave(poll(path, POLL_MS, (data) => {
      // /metrics changes every second (uptime); redraw only when what we show changed.
      if (key === 'metrics' &&
          JSON.stringify(parseMetrics(data)) === JSON.stringify(parseMetrics(state.metrics))) return;
      state[key] = data;
      live.textContent = `Live: updated ${new Date().toLocaleTimeString()}.`;
      // A job finishing changes the build totals too.
      draw({[part]: true, builds: key === 'failures' || key === 'running'});
    }, (e) => { live.replaceChildren(errorBox(e)); }));
  }
}
