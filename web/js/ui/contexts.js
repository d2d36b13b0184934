// The context tree: every held context with its forks, per-node figures, and the actions on the
// selected one (fork n ways, delete, snapshot download, restore by upload, create).

import { $, fill, h } from '../dom.js';
import { apiKey, postJson, request } from '../api.js';
import { forkRows, guideText } from '../lib/tree.js';
import { fmtAgo, fmtDuration, fmtInt } from '../lib/format.js';

// Rows are kept by context id and updated in place (the ages change every second): a row is not replaced
// under the pointer between the mousedown and the mouseup of a click.
const rowEls = new Map(); // id -> { tr, cells, key }

export function renderContexts(app, now) {
  const rows = forkRows(app.model.contexts, app.selected);
  $('#ctx-count').textContent = rows.length ? `${rows.length} held` : '';
  $('#ctx-empty').hidden = rows.length > 0;
  const body = $('#ctx-rows');
  const keep = new Set();
  rows.forEach((r, i) => {
    keep.add(r.id);
    if (!rowEls.has(r.id)) rowEls.set(r.id, makeRow(app, r.id));
    const el = rowEls.get(r.id);
    updateRow(el, r, now);
    if (body.children[i] !== el.tr) body.insertBefore(el.tr, body.children[i] ?? null);
  });
  for (const [id, el] of rowEls) {
    if (!keep.has(id)) {
      el.tr.remove();
      rowEls.delete(id);
    }
  }
  const none = !app.selected;
  for (const id of ['#fork-btn', '#snapshot-btn', '#delete-btn']) $(id).disabled = none;
}

function makeRow(app, id) {
  const td = (cls) => h('td', { class: cls });
  const cells = { name: td('ctx-name'), tokens: td('num ctx-tokens'), pages: td('num ctx-pages'),
    owned: td('num ctx-owned'), shared: td('num ctx-shared'), age: td('num'), used: td('num') };
  const tr = h('tr', { data: { id }, tabindex: 0, onclick: () => app.select(id),
    onkeydown: (e) => e.key === 'Enter' && app.select(id) }, Object.values(cells));
  return { tr, cells, key: null };
}

function updateRow(el, r, now) {
  const c = r.ctx;
  el.tr.className = ['ctx-row', r.selected && 'selected', r.onPath && 'on-path', c.busy && 'busy'].filter(Boolean).join(' ');
  const ckpts = c.checkpoints ?? [];
  const key = [guideText(r), c.parent, r.orphan, c.busy, c.state_position, ckpts.join()].join('|');
  if (key !== el.key) {
    el.key = key;
    const hasState = c.state_position !== null && c.state_position !== undefined;
    fill(el.cells.name, h('span', { class: 'guide' }, guideText(r)), r.id,
      r.orphan ? h('span', { class: 'tag', title: `forked from ${c.parent}, no longer held` }, `from ${c.parent}`) : null,
      c.busy ? h('span', { class: 'tag busy' }, 'busy') : null,
      hasState ? h('span', { class: 'tag', title: `recurrent state at ${c.state_position}, checkpoints at ${ckpts.join(', ') || 'none'}` },
        `state ${c.state_position} · ${ckpts.length} ckpt`) : null);
  }
  const text = (td, v) => td.textContent !== v && (td.textContent = v);
  text(el.cells.tokens, fmtInt(c.tokens));
  text(el.cells.pages, fmtInt(c.pages));
  text(el.cells.owned, fmtInt(c.pages_owned));
  text(el.cells.shared, fmtInt(c.pages_shared));
  text(el.cells.age, fmtDuration(now - c.created_ms));
  text(el.cells.used, fmtAgo(c.last_used_ms, now));
}

export function setupContexts(app) {
  const act = (fn) => async () => {
    if (!app.selected) return;
    try {
      await fn(app.selected);
    } catch (e) {
      app.error(e);
    }
  };

  $('#fork-btn').addEventListener('click', act(async (id) => {
    const n = Math.max(1, Math.min(256, Number($('#fork-n').value) || 1));
    const res = await postJson(`/v1/contexts/${encodeURIComponent(id)}/fork?n=${n}`, {});
    app.forked(id, res.branches.map((b) => b.id));
    app.reload();
  }));

  $('#delete-btn').addEventListener('click', act(async (id) => {
    const parent = app.model.contexts.get(id)?.parent;
    // Select away first, so that nothing asks for the deleted context's pages.
    app.select(app.model.contexts.has(parent) ? parent : null);
    await request(`/v1/contexts/${encodeURIComponent(id)}`, { method: 'DELETE' });
    app.model.contexts.delete(id);
    app.render();
    app.reload();
  }));

  $('#snapshot-btn').addEventListener('click', act(async (id) => {
    const url = `/v1/contexts/${encodeURIComponent(id)}/snapshot`;
    // Without a key the browser downloads the file itself, streamed to disk whatever its size; with one,
    // the request needs a header, so the file comes through fetch and a Blob.
    const href = apiKey.get() ? URL.createObjectURL(await (await request(url)).blob()) : url;
    const a = h('a', { href, download: `${id}.llamayctx`, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    if (href !== url) setTimeout(() => URL.revokeObjectURL(href), 60000);
  }));

  $('#restore-file').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    try {
      const res = await request('/v1/contexts/restore', {
        method: 'POST', body: file, headers: { 'Content-Type': 'application/octet-stream' },
      });
      const ctx = await res.json();
      app.madeHere(ctx.id);
      app.select(ctx.id);
      app.reload();
    } catch (err) {
      app.error(err);
    } finally {
      e.target.value = '';
    }
  });

  $('#new-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    const text = $('#new-prompt').value.trim();
    try {
      const ctx = await app.createContext(text);
      $('#new-prompt').value = '';
      app.select(ctx.id);
    } catch (err) {
      app.error(err);
    }
  });
}
