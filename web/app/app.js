// Entry point: routes, navigation, token handling, and the lifecycle of a view
// (each render gets a context whose cleanups run when the route changes).

import {route, parseHash, match} from './router.js';
import {h, clear, errorBox} from './util.js';
import {getToken, setToken} from './api.js';
import {askToken, updateTokenButton} from './auth.js';
import {renderDashboard} from './views/dashboard.js';
import {renderJobs} from './views/jobs.js';
import {renderJob} from './views/job.js';
import {renderCase} from './views/case.js';
import {renderTolerances} from './views/tolerances.js';
import {renderDevices} from './views/devices.js';
import {renderBuilds, renderCompare} from './views/builds.js';
import {renderSuite} from './views/suite.js';
import {renderHistory} from './views/history.js';
import {renderFlaky} from './views/flaky.js';

route('/', renderDashboard);
route('/jobs', renderJobs);
route('/jobs/:id', renderJob);
route('/cases/:id', renderCase);
route('/tolerances', renderTolerances);
route('/devices', renderDevices);
route('/builds', renderBuilds);
route('/compare', renderCompare);
route('/suite', renderSuite);
route('/history', renderHistory);
route('/flaky', renderFlaky);

const main = document.getElementById('main');
let cleanups = [];
let generation = 0;
let firstRender = true;

function setNav(path) {
  for (const a of document.querySelectorAll('#nav a')) {
    const target = a.getAttribute('href').slice(1);
    const on = target === '/' ? path === '/' : path === target || path.startsWith(target + '/');
    if (on) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// Once a view has rendered, #main carries data-route (the hash it rendered, without
// '#') and data-render (unique per render, across page loads too), so a test or a
// script waits for the view it asked for, not for whatever view is on screen.
function markRendered(gen) {
  main.dataset.route = (location.hash || '#/').replace(/^#/, '') || '/';
  main.dataset.render = `${performance.timeOrigin}:${gen}`;
}

async function render() {
  for (const f of cleanups) f();
  cleanups = [];
  const gen = ++generation;
  delete main.dataset.route;
  const {path, query} = parseHash(location.hash);
  setNav(path);
  clear(main);
  const m = match(path);
  if (!m) {
    document.title = 'Not found · numval';
    main.append(h('h1', 'Not found'), h('p', 'No page at ', h('code', path), '. ',
      h('a', {href: '#/'}, 'Go to the dashboard')));
    markRendered(gen);
    return;
  }
  main.setAttribute('aria-busy', 'true');
  const ctx = {
    main, params: m.params, query, path,
    onLeave: (f) => cleanups.push(f),
    alive: () => gen === generation,
  };
  try {
    await m.view(ctx);
  } catch (e) {
    if (gen === generation) {
      clear(main);
      main.append(h('h1', 'Could not load this page'), errorBox(e));
      // Anonymous reads may be off (numvald's anonymous_read): offer to enter a token.
      if (e && (e.status === 401 || e.status === 403)) {
        main.append(h('p', h('button', {type: 'button', onclick: async () => {
          if (await askToken('This server needs a token to read.')) render();
        }}, 'Enter a token')));
      }
    }
  } finally {
    if (gen === generation) {
      main.removeAttribute('aria-busy');
      markRendered(gen);
    }
  }
  // Move focus to the new page's heading for keyboard and screen-reader users,
  // but not on the first load (the page starts at the top anyway).
  const h1 = main.querySelector('h1');
  if (h1 && !firstRender && gen === generation) {
    h1.setAttribute('tabindex', '-1');
    h1.focus({preventScroll: false});
  }
  firstRender = false;
}

document.getElementById('token-btn').addEventListener('click', async () => {
  if (getToken()) {
    setToken('');
    updateTokenButton();
  } else {
    await askToken('Token for write actions (cancel a job, set a tolerance).');
  }
});

window.addEventListener('hashchange', render);
updateTokenButton();
render();
