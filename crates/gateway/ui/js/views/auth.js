// The token dialog, shown only when the daemon answers 401: the token is kept in localStorage and
// sent as `Authorization: Bearer` on requests and as `access_token` on the stream.

import { h } from '../util.js';

/**
 * Asks for an access token in a modal dialog.
 * @param {string} reason what the daemon said
 * @returns {Promise<string | null>} the token, or null if the person cancelled
 */
export function askToken(reason) {
  return new Promise((resolve) => {
    const input = h('input', { type: 'password', name: 'token', autocomplete: 'current-password', required: true, 'aria-label': 'access token', placeholder: 'token' });
    const dialog = h(
      'dialog',
      { class: 'auth-dialog', 'aria-labelledby': 'auth-title' },
      h(
        'form',
        { method: 'dialog' },
        h('h2', { id: 'auth-title' }, 'This daemon needs an access token'),
        h('p', { class: 'muted' }, reason || 'The daemon answered 401 Unauthorized.'),
        h('label', null, 'Access token ', input),
        h('p', { class: 'muted small' }, 'Kept in this browser (localStorage) and sent only to this daemon.'),
        h('div', { class: 'dialog-buttons' }, h('button', { value: 'cancel', type: 'submit', formnovalidate: true }, 'Cancel'), h('button', { value: 'ok', type: 'submit', class: 'primary' }, 'Use token')),
      ),
    );
    dialog.addEventListener('close', () => {
      const token = dialog.returnValue === 'ok' ? input.value.trim() : '';
      dialog.remove();
      resolve(token || null);
    });
    document.body.appendChild(dialog);
    dialog.showModal();
    input.focus();
  });
}
