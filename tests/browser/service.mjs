// Starts and stops a real numvald (with its supervised emu workers) for the browser
// tests: 127.0.0.1 on a free port, a temp data dir, tokens created with
// `numvald token create`. Everything started here is killed in stopService and,
// as a last resort, when the node process exits.

import {spawn, execFileSync} from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const started = new Set();

function killGroup(child, sig) {
  try { process.kill(-child.pid, sig); } catch (e) { /* already gone */ }
}

process.on('exit', () => {
  for (const c of started) killGroup(c, 'SIGKILL');
});
// meson's timeout and Ctrl-C: kill what we started, then die of the same signal.
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    for (const c of started) killGroup(c, 'SIGKILL');
    process.exit(128 + ({SIGINT: 2, SIGTERM: 15, SIGHUP: 1})[sig]);
  });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

function config({port, dataDir, workerBin, webDir, devices}) {
  return [
    '[server]',
    `listen = 127.0.0.1:${port}`,
    `data_dir = ${dataDir}`,
    `web_dir = ${webDir}`,
    `worker = ${workerBin}`,
    'anonymous_read = loopback',
    '',
    '[device emu0]',
    'backend = emu',
    'slots = 1',
    '',
    '[device emufast]',
    'backend = emu:transcendental=fast',
    'slots = 1',
    '',
    // Fused regions that round intermediates to bf16: the faulty fused mode
    // (docs/JOBS.md "emu's fused mode").
    '[device emufused]',
    'backend = emu:fused_intermediate=bf16',
    'slots = 1',
    '',
    // A test's own devices ({name: backend}), beside these three.
    ...Object.entries(devices || {}).flatMap(([n, b]) => [`[device ${n}]`, `backend = ${b}`, 'slots = 1', '']),
  ].join('\n');
}

function createToken(bins, cfg, name, scope) {
  const out = execFileSync(bins.numvald, ['--config', cfg, 'token', 'create', name, '--scope', scope],
    {encoding: 'utf8', timeout: 10000});
  const words = out.trim().split(/\s+/).filter((w) => /^[A-Za-z0-9_.~+/=-]{16,}$/.test(w));
  if (!words.length) throw new Error(`no token in the output of "numvald token create": ${out}`);
  return words[words.length - 1];
}

export async function api(svc, method, p, body, token) {
  const headers = {Accept: 'application/json'};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(`${svc.url}/api/v1${p}`, {method, headers,
    body: body === undefined ? undefined : JSON.stringify(body)});
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (e) { json = {raw: text}; }
  return {status: res.status, body: json};
}

export async function waitJob(svc, id, timeoutMs) {
  const end = Date.now() + timeoutMs;
  let job = null;
  while (Date.now() < end) {
    job = (await api(svc, 'GET', `/jobs/${id}`)).body.job;
    if (['passed', 'failed', 'error', 'cancelled'].includes(job.state)) return job;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`job ${id} did not finish in ${timeoutMs} ms: ${JSON.stringify(job)}\n` +
    `numvald log tail:\n${svc.log().slice(-3000)}`);
}

export async function startService({bins, dir, root, devices}) {
  const port = await freePort();
  const dataDir = path.join(dir, 'var');
  fs.mkdirSync(dataDir, {recursive: true});
  const cfg = path.join(dir, 'numvald.ini');
  fs.writeFileSync(cfg, config({port, dataDir, workerBin: bins.worker, webDir: path.join(root, 'web'), devices}));
  const submitToken = createToken(bins, cfg, 'browser-submit', 'submit');
  const adminToken = createToken(bins, cfg, 'browser-admin', 'admin');
  const logFile = path.join(dir, 'numvald.log');
  const logFd = fs.openSync(logFile, 'a');
  // Own process group, so its supervised workers die with it.
  const child = spawn(bins.numvald, ['--config', cfg], {detached: true, stdio: ['ignore', logFd, logFd]});
  fs.closeSync(logFd);
  started.add(child);
  const svc = {child, port, url: `http://127.0.0.1:${port}`, submitToken, adminToken, dir,
    log: () => { try { return fs.readFileSync(logFile, 'utf8'); } catch (e) { return ''; } }};
  const end = Date.now() + 15000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`numvald exited ${child.exitCode}:\n${svc.log()}`);
    try {
      const r = await fetch(`${svc.url}/healthz`);
      if (r.ok) break;
    } catch (e) { /* not listening yet */ }
    if (Date.now() > end) throw new Error(`numvald not up after 15 s:\n${svc.log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return svc;
}

export async function stopService(svc) {
  const {child} = svc;
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((r) => child.once('exit', r));
    killGroup(child, 'SIGTERM');
    const t = setTimeout(() => killGroup(child, 'SIGKILL'), 3000);
    await gone;
    clearTimeout(t);
  }
  // Workers that outlived numvald in its group.
  killGroup(child, 'SIGKILL');
  started.delete(child);
}

// Submits each spec of specs ({key: job spec}) with the submit token, all before
// waiting for any (the devices run them in parallel), then waits for each to
// finish: {key: the finished job}.
export async function runJobs(svc, specs, timeoutMs) {
  const ids = {};
  for (const [k, spec] of Object.entries(specs)) {
    const r = await api(svc, 'POST', '/jobs', spec, svc.submitToken);
    if (r.status !== 201) throw new Error(`job ${k} not accepted: ${r.status} ${JSON.stringify(r.body)}`);
    ids[k] = r.body.job.id;
  }
  const jobs = {};
  for (const [k, id] of Object.entries(ids)) jobs[k] = await waitJob(svc, id, timeoutMs);
  return jobs;
}

// Debian's chromium (at chromiumPath) headless through playwright-core, and a
// 1280 x 860 page whose uncaught page errors fail the test: {browser, page}.
// The caller closes browser.
export async function openPage(chromiumPath) {
  const {chromium} = await import('playwright-core');
  const browser = await chromium.launch({executablePath: chromiumPath, args: ['--no-sandbox'], headless: true});
  const page = await (await browser.newContext({viewport: {width: 1280, height: 860}})).newPage();
  page.on('pageerror', (e) => { throw new Error(`page error: ${e.message}`); });
  return {browser, page};
}

// Runs `action` (a goto, a click, a select) and waits until the web UI has rendered
// the view of `route` because of it: #main's data-route (set by web/app/app.js once
// a view has rendered) equals route (the hash without '#'; a RegExp is tested against
// it), its data-render differs from before the action, and aria-busy is cleared.
// Waiting for the URL alone is not enough: the URL changes before the new view renders.
export async function shown(page, route, action, timeout = 15000) {
  const before = await page.evaluate(() => document.getElementById('main')?.dataset.render ?? null)
    .catch(() => null);
  await action();
  const want = route instanceof RegExp ? {re: route.source, flags: route.flags} : {eq: route};
  try {
    await page.waitForFunction(([w, prev]) => {
      const m = document.getElementById('main');
      if (!m || m.hasAttribute('aria-busy') || !m.dataset.render || m.dataset.render === prev) return false;
      const got = m.dataset.route;
      return w.eq !== undefined ? got === w.eq : new RegExp(w.re, w.flags).test(got);
    }, [want, before], {timeout});
  } catch (e) {
    const now = await page.evaluate(() => {
      const m = document.getElementById('main');
      return {url: location.href, route: m?.dataset.route, busy: m?.hasAttribute('aria-busy'),
        h1: document.querySelector('h1')?.textContent};
    }).catch(() => ({}));
    throw new Error(`view ${route} not rendered in ${timeout} ms: ${JSON.stringify(now)}`);
  }
}

// Opens url (the service's URL with a hash route) and waits for its view. The same
// URL again is a reload: a fragment navigation to the current hash renders nothing.
export async function visit(page, url, timeout = 15000) {
  const hash = new URL(url).hash;
  const route = hash.replace(/^#/, '') || '/';
  const same = page.url() === url;
  await shown(page, route, () => (same ? page.reload() : page.goto(url)), timeout);
}

// What every browser test file needs, found one way: the binaries
// ($NUMVAL_BUILD_DIR, which meson sets, else build-web/, else build/), Debian's
// chromium ($CHROMIUM, else /usr/bin/chromium) and playwright-core. When one is
// missing the file exits 77 (meson's "skipped"); under `node --test` it gets the
// reason to skip its tests with instead. here: the test file's directory.
export function prerequisites(here) {
  const root = path.resolve(here, '../..');
  const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
  const cands = [process.env.NUMVAL_BUILD_DIR, path.join(root, 'build-web'), path.join(root, 'build')];
  const buildDir = cands.find((d) => d && fs.existsSync(path.join(d, 'daemon', 'numvald'))) || cands.find(Boolean);
  const bins = {
    numvald: process.env.NUMVALD || path.join(buildDir, 'daemon', 'numvald'),
    worker: process.env.NUMVAL_WORKER || path.join(buildDir, 'worker', 'numval-worker'),
    ctl: process.env.NUMVALCTL || path.join(buildDir, 'client', 'numvalctl'),
  };
  const missing = [];
  if (!fs.existsSync(chromium)) missing.push(`chromium at "${chromium}" (apt-get install chromium)`);
  if (!fs.existsSync(path.join(here, 'node_modules', 'playwright-core'))) {
    missing.push('playwright-core (run "npm ci" in tests/browser)');
  }
  for (const [k, p] of Object.entries(bins)) if (!fs.existsSync(p)) missing.push(`${k} at "${p}"`);
  const skip = missing.length ? `missing: ${missing.join('; ')}` : false;
  if (skip && !process.env.NODE_TEST_CONTEXT) {
    console.log(`1..0 # SKIP ${skip}`);
    process.exit(77);
  }
  return {root, chromium, bins, skip};
}
