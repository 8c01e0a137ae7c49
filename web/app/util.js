// Small DOM and formatting helpers shared by every view.

// h('a.cls#id', {href: '#/x'}, 'text', child...) builds an element.
// Attributes starting with "on" become listeners; null/false children are skipped.
export function h(tag, attrs, ...children) {
  const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(tag);
  const el = document.createElement(m ? m[1] : tag);
  if (m && m[2]) {
    for (const part of m[2].match(/[.#][\w-]+/g)) {
      if (part[0] === '.') el.classList.add(part.slice(1));
      else el.id = part.slice(1);
    }
  }
  if (attrs && (typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// Numbers: integers as is, others with up to 4 significant digits; exponent when tiny/huge.
export function num(v) {
  if (v === null || v === undefined || v === '') return '—';
  if (typeof v === 'string') return v;
  if (typeof v !== 'number') return String(v);
  if (Number.isNaN(v)) return 'NaN';
  if (!Number.isFinite(v)) return v > 0 ? '+Inf' : '-Inf';
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
  return String(Number(v.toPrecision(4)));
}

// Exact values as the server sent them (numbers or strings such as "nan", "0x1.8p+3").
export function exact(v) {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(v);
  if (v === null || v === undefined) return '—';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

export function when(ts) {
  if (!ts) return '—';
  const d = new Date(ts);
  if (Number.isNaN(d.getTime())) return String(ts);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC');
}

export function duration(a, b) {
  if (!a) return '—';
  const t0 = new Date(a).getTime();
  const t1 = b ? new Date(b).getTime() : Date.now();
  if (!Number.isFinite(t0) || !Number.isFinite(t1)) return '—';
  const s = Math.max(0, Math.round((t1 - t0) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

// A state/verdict badge; the class drives colour, the text stays readable without colour.
export function badge(state) {
  const s = String(state ?? 'unknown');
  return h('span', {class: `badge b-${s.replace(/[^a-z_]/gi, '')}`}, s);
}

export function link(href, text) {
  return h('a', {href}, text);
}

export function kv(rows) {
  const dl = h('dl.kv');
  for (const [k, v] of rows) {
    if (v === undefined) continue;
    dl.append(h('dt', k), h('dd', v === null ? '—' : v));
  }
  return dl;
}

export function section(title, ...body) {
  const id = 'sec-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  return h('section.card', {'aria-labelledby': id}, h('h2', {id}, title), ...body);
}

export function empty(text) {
  return h('p.empty', text);
}

export function errorBox(err) {
  const msg = err && err.message ? err.message : String(err);
  return h('div.error', {role: 'alert'}, msg);
}

// A copy-to-clipboard button next to a code snippet.
export function copyable(text, label = 'Copy') {
  const code = h('code.copy-src', text);
  const status = h('span.copy-status', {'aria-live': 'polite'});
  const btn = h('button.small', {type: 'button', onclick: async () => {
    try {
      await navigator.clipboard.writeText(text);
      status.textContent = 'copied';
    } catch (e) {
      const r = document.createRange();
      r.selectNodeContents(code);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(r);
      status.textContent = 'selected: press Ctrl+C';
    }
  }}, label);
  return h('div.copyable', code, btn, status);
}

export function shortId(s, n = 12) {
  s = String(s ?? '');
  return s.length > n ? s.slice(0, n) + '…' : s;
}

// Query string from an object, dropping empty values.
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') u.set(k, String(v));
  }
  const s = u.toString();
  return s ? '?' + s : '';
}
