// The only way the UI talks to numvald: the public JSON API under /api/v1.
// Reads go out without a token unless one is stored; writes always send it.

const BASE = 'api/v1';
const TOKEN_KEY = 'numval.token';

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
}

export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch (e) { /* storage disabled: the token lives for this request only */ }
}

// URL of an API path ("/jobs/3") relative to the page, so a UI served under a prefix works.
export function apiUrl(path) {
  return new URL(BASE + path, document.baseURI).toString();
}

function headers(extra) {
  const hd = {Accept: 'application/json', ...extra};
  const t = getToken();
  if (t) hd.Authorization = `Bearer ${t}`;
  return hd;
}

async function errorFrom(res) {
  let code = 'http_' + res.status, message = `${res.status} ${res.statusText}`, field;
  try {
    const body = await res.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
      field = body.error.field;
    }
  } catch (e) { /* not JSON: keep the status line */ }
  return new ApiError(res.status, code, message, field);
}

// ETag cache per URL: a 304 answers from the last body we saw.
const etags = new Map();
// Last body per polled URL (the views poll a handful of URLs).
const seen = new Map();

// path: an API path ("/jobs"), or a root path outside /api/v1 ("!metrics").
// track: remember the body and report unchanged ones (for polling).
export async function get(path, {signal, track} = {}) {
  const root = path.startsWith('!');
  const url = root ? new URL(path.slice(1), document.baseURI).toString() : apiUrl(path);
  const cached = etags.get(url);
  const hd = headers(cached ? {'If-None-Match': cached.etag} : {});
  let res;
  try {
    res = await fetch(url, {headers: hd, signal, cache: 'no-cache'});
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'unreachable', `numvald is unreachable (${e.message})`);
  }
  if (res.status === 304 && cached) return {data: cached.data, changed: false};
  if (!res.ok) throw await errorFrom(res);
  const text = await res.text();
  const isJson = !root || (res.headers.get('Content-Type') || '').includes('json');
  // Without an ETag from the server, an unchanged body still counts as unchanged, so
  // polling views do not redraw (and steal keyboard focus) for nothing.
  const last = track ? seen.get(url) : null;
  if (last && last.text === text) return {data: last.data, changed: false};
  const data = isJson ? JSON.parse(text) : text;
  if (track) seen.set(url, {text, data});
  const etag = res.headers.get('ETag');
  if (etag) etags.set(url, {etag, data});
  return {data, changed: true};
}

export async function getJson(path, opts) {
  return (await get(path, opts)).data;
}

// Feature detection: an endpoint that does not exist yet answers 404 (or 405/501)
// and the view says "no data yet" instead of failing.
export async function optional(path, opts) {
  try {
    return await getJson(path, opts);
  } catch (e) {
    if (e instanceof ApiError && [404, 405, 501].includes(e.status)) return null;
    throw e;
  }
}

export async function post(path, body) {
  const url = apiUrl(path);
  let res;
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: headers({'Content-Type': 'application/json'}),
      body: body === undefined ? '{}' : JSON.stringify(body),
    });
  } catch (e) {
    throw new ApiError(0, 'unreachable', `numvald is unreachable (${e.message})`);
  }
  if (!res.ok) throw await errorFrom(res);
  const text = await res.text();
  return text ? JSON.parse(text) : {};
}

// Polls a path, calling onData only when the body changed (ETag/If-None-Match),
// pausing while the tab is hidden. Returns a stop function.
export function poll(path, intervalMs, onData, onError) {
  let stopped = false, timer = null;
  const ctrl = new AbortController();
  async function tick() {
    if (stopped) return;
    if (!document.hidden) {
      try {
        const r = await get(typeof path === 'function' ? path() : path, {signal: ctrl.signal, track: true});
        if (!stopped && r.changed) onData(r.data);
      } catch (e) {
        if (!stopped && e.name !== 'AbortError' && onError) onError(e);
      }
    }
    if (!stopped) timer = setTimeout(tick, intervalMs);
  }
  timer = setTimeout(tick, intervalMs);
  return () => { stopped = true; clearTimeout(timer); ctrl.abort(); };
}
