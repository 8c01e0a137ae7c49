// Tokens for write actions: asked for in a dialog, kept in sessionStorage only.

import {getToken, setToken, ApiError} from './api.js';

export function updateTokenButton() {
  const b = document.getElementById('token-btn');
  if (!b) return;
  b.textContent = getToken() ? 'Token set · clear' : 'Set token';
  b.setAttribute('aria-pressed', getToken() ? 'true' : 'false');
}

// Asks for a bearer token in a modal dialog; resolves to the token or '' if cancelled.
export function askToken(why) {
  const dlg = document.getElementById('token-dialog');
  const input = dlg.querySelector('input');
  dlg.querySelector('.why').textContent = why || '';
  input.value = '';
  return new Promise((resolve) => {
    dlg.addEventListener('close', () => {
      const v = dlg.returnValue === 'ok' ? input.value.trim() : '';
      if (v) setToken(v);
      updateTokenButton();
      resolve(v);
    }, {once: true});
    dlg.showModal();
    input.focus();
  });
}

// Runs a write action: asks for a token first when none is stored, shows the
// server's own error text in `status` when refused (and forgets a token the server
// rejected as invalid, so the next try asks again). Resolves to the result or null.
export async function writeAction(why, fn, status) {
  status.textContent = '';
  status.className = 'action-status';
  if (!getToken()) {
    const t = await askToken(why);
    if (!t) {
      status.textContent = 'Cancelled: a token is needed for this action.';
      return null;
    }
  }
  try {
    const r = await fn();
    status.textContent = 'Done.';
    status.classList.add('ok');
    return r;
  } catch (e) {
    const code = e instanceof ApiError ? ` (${e.status} ${e.code})` : '';
    const field = e instanceof ApiError && e.field ? ` at ${e.field}` : '';
    status.textContent = `Refused${code}: ${e.message}${field}`;
    status.classList.add('err');
    status.setAttribute('role', 'alert');
    if (e instanceof ApiError && e.status === 401) {
      setToken('');
      updateTokenButton();
    }
    return null;
  }
}
