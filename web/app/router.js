// Hash routing (#/jobs/12?verdict=failed): static serving is enough, links are real links.

const routes = [];

export function route(pattern, view) {
  const keys = [];
  const re = new RegExp('^' + pattern.replace(/:(\w+)/g, (_, k) => {
    keys.push(k);
    return '([^/]+)';
  }) + '/?$');
  routes.push({re, keys, view});
}

export function parseHash(hash) {
  const raw = (hash || '').replace(/^#/, '') || '/';
  const qi = raw.indexOf('?');
  const path = qi < 0 ? raw : raw.slice(0, qi);
  const query = Object.fromEntries(new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1)));
  return {path, query};
}

export function match(path) {
  for (const r of routes) {
    const m = r.re.exec(path);
    if (m) {
      const params = {};
      r.keys.forEach((k, i) => { params[k] = decodeURIComponent(m[i + 1]); });
      return {view: r.view, params};
    }
  }
  return null;
}

// Builds "#/path?k=v" from a path and a query object (empty values dropped).
export function href(path, query) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  const s = u.toString();
  return '#' + path + (s ? '?' + s : '');
}

// Navigates to a hash, re-rendering even when it is the current one.
export function go(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}
