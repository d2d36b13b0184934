// The page's wiring: one model of the server (lib/state.js) fed by /v1/state and /v1/events, the
// selection, and a render of every panel at most once a frame.

import { $ } from './dom.js';
import { ApiError, apiKey, getJson, postJson } from './api.js';
import { connect } from './live.js';
import { applyEvent, applyState, emptyModel } from './lib/state.js';
import { createSeries } from './lib/memory.js';
import { stripModel } from './lib/pages.js';
import { createTranscripts } from './lib/turns.js';
import { compareIds, fmtInt, fmtRate } from './lib/format.js';
import { renderContexts, setupContexts } from './ui/contexts.js';
import { renderStrip } from './ui/strip.js';
import { renderMemory } from './ui/memory.js';
import { renderPrefix } from './ui/prefix.js';
import { renderInfo, renderEvents } from './ui/info.js';
import { renderChat, setupChat } from './ui/chat.js';

const app = {
  model: emptyModel(),
  selected: null,
  strip: null, // the selected context's page strip (lib/pages.js)
  series: createSeries(120), // pages in use, one sample per stats tick: two minutes
  transcripts: createTranscripts(),
  chat: { compare: null, sending: 0, turns: new Set(), version: 0 }, // turns: contexts in a turn from this page
  live: null,
  status: 'connecting',
  // Contexts this page made (created, forked, restored) that no state it has read lists yet: a /v1/state
  // answer already on its way when the page made one does not know it, and must not take the selection
  // away from it.
  made: new Set(),
};

let frame = 0;
app.render = () => {
  if (!frame) frame = requestAnimationFrame(draw);
};

function draw() {
  frame = 0;
  const now = Date.now();
  const st = app.model.stats;
  $('#conn').textContent = app.status;
  $('#conn').className = `badge ${app.status}`;
  $('#live-stats').textContent = app.status === 'live'
    ? `${fmtRate(st.tokens_per_s)} · ${fmtInt(st.requests_active)} running · ${fmtInt(st.queue)} queued` : '';
  renderMemory(app);
  renderContexts(app, now);
  renderStrip(app);
  renderChat(app);
  renderPrefix(app, now);
  renderInfo(app);
  renderEvents(app);
}

app.error = (e) => {
  if (e instanceof ApiError && e.status === 401) return askKey();
  $('#error').textContent = e.message ?? String(e);
  clearTimeout(app.errorTimer);
  app.errorTimer = setTimeout(() => ($('#error').textContent = ''), 8000);
};

app.select = (id) => {
  if (app.chat.compare && !app.chat.compare.branches.includes(id)) app.chat.compare = null;
  if (id !== app.selected) {
    app.selected = id;
    app.strip = null;
    loadStrip();
  }
  app.render();
};

app.forked = (parent, children) => app.transcripts.fork(parent, children);
app.madeHere = (...ids) => ids.forEach((id) => app.made.add(id));

app.createContext = async (system) => {
  const ctx = await postJson('/v1/contexts', system ? { messages: [{ role: 'system', content: system }] } : {});
  app.madeHere(ctx.id);
  app.reload();
  return ctx;
};

// /v1/state, coalesced: one request in flight and at most one more after it, whoever asks.
let loading = null;
let again = false;
app.reload = () => {
  if (loading) {
    again = true;
    return loading;
  }
  loading = (async () => {
    try {
      do {
        again = false;
        // A snapshot older than an event already applied is not applied (lib/state.js): its context list
        // lacks what that event added, and the selection would move off a new fork. One more reload settles it.
        if (applyState(app.model, await getJson('/v1/state')).stale) {
          again = true;
          continue;
        }
        if (app.status !== 'live') app.series.push(usedPages());
        afterChange();
      } while (again);
    } catch (e) {
      app.error(e);
    } finally {
      loading = null;
    }
  })();
  return loading;
};

// A reload soon, for events that change what only /v1/state tells in full; a burst of events makes one.
let soonTimer = null;
function reloadSoon() {
  if (!soonTimer) soonTimer = setTimeout(() => {
    soonTimer = null;
    app.reload();
  }, 150);
}

function usedPages() {
  const p = app.model.pool.pages ?? {};
  return (p.unique ?? 0) + (p.shared ?? 0) + (p.prefix_only ?? 0);
}

// After the model changed: keep the selection valid (the first context when none is chosen), and the strip
// current.
function afterChange() {
  const ctxs = app.model.contexts;
  for (const id of app.made) if (ctxs.has(id)) app.made.delete(id);
  if (app.selected && !ctxs.has(app.selected) && !app.made.has(app.selected)) app.select(null);
  if (!app.selected && ctxs.size > 0 && !app.chat.sending) app.select([...ctxs.keys()].sort(compareIds)[0]);
  else loadStrip();
  app.render();
}

let stripSeq = 0;
async function loadStrip() {
  const id = app.selected;
  // A context lent to a running request cannot be inspected (409): its strip waits for the turn to end.
  if (!id || !app.model.contexts.has(id) || app.model.contexts.get(id).busy || app.chat.turns.has(id)) return;
  const seq = ++stripSeq;
  try {
    const resp = await getJson(`/v1/contexts/${encodeURIComponent(id)}/pages`);
    if (seq !== stripSeq || id !== app.selected) return; // a newer request, or another selection
    app.strip = stripModel(resp, app.model.server?.kv?.page_tokens);
    app.render();
  } catch (e) {
    if (!(e instanceof ApiError && (e.status === 404 || e.status === 409))) app.error(e); // deleted, or busy, meanwhile
  }
}

function onEvent(ev) {
  const r = applyEvent(app.model, ev, Date.now());
  if (r.skipped) return;
  if (ev.type === 'context.forked') app.forked(ev.data.parent, ev.data.children ?? []);
  if (ev.type === 'context.deleted') {
    app.transcripts.drop(ev.data.id);
    app.made.delete(ev.data.id);
  }
  if (ev.type === 'stats') app.series.push(usedPages());
  if (r.resync) app.reload();
  else if (r.refresh) reloadSoon();
  if (ev.type.startsWith('context.') && ev.type !== 'context.snapshotted') afterChange();
  else app.render();
}

function start() {
  app.live?.stop();
  app.live = connect({
    onEvent,
    onStatus: (s) => {
      app.status = s;
      app.render();
    },
    reload: app.reload,
    lastId: () => app.model.eventId,
  });
}

function askKey() {
  const dlg = $('#key-dialog');
  if (dlg.open) return;
  app.live?.stop();
  app.status = 'needs key';
  app.render();
  dlg.showModal();
}

$('#key-form').addEventListener('submit', () => {
  apiKey.set($('#key-input').value.trim());
  $('#key-input').value = '';
  start();
});

setupContexts(app);
setupChat(app);
// The ages in the tree move on even when nothing happens.
setInterval(app.render, 1000);
start();
