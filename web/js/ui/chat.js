// Chat with the selected context through the normal chat route (llamay_session, streamed), with per turn
// the prompt tokens reused against computed and the decode speed. "Fork here" forks the conversation into
// branches; the next message goes to every branch and their answers stand side by side.

import { $, changed, fill, h } from '../dom.js';
import { postJson, request } from '../api.js';
import { createSseParser } from '../lib/sse.js';
import { chatBody, readChunk, turnStats } from '../lib/turns.js';
import { fmtDuration, fmtInt, fmtRate } from '../lib/format.js';

export function renderChat(app) {
  const cmp = app.chat.compare;
  $('#chat-ctx').textContent = cmp ? `${cmp.base} → ${cmp.branches.join(', ')}` : (app.selected ?? 'a new context');
  $('#single-view').hidden = !cmp;
  $('#fork-here').disabled = !app.selected || app.chat.sending > 0;
  const ctx = app.model.contexts.get(app.selected);
  // The transcript is redrawn only when a turn changed (app.chat.version), so that its text can be selected.
  if (!changed('chat', app.chat.version, app.selected, cmp, ctx?.tokens)) return;
  const box = $('#transcript');
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  if (cmp) {
    const shared = app.transcripts.get(cmp.branches[0]).slice(0, cmp.from);
    fill(box, shared.map(turnView), h('div', { class: 'fork-mark' }, `forked from ${cmp.base} into ${cmp.branches.length}`),
      h('div', { class: 'columns' }, cmp.branches.map((id) => h('div', { class: 'column', data: { id } },
        h('div', { class: 'column-head' }, h('b', null, id),
          h('button', { type: 'button', onclick: () => { app.chat.compare = null; app.select(id); } }, 'continue this one')),
        app.transcripts.get(id).slice(cmp.from).map(turnView)))));
  } else {
    const turns = app.selected ? app.transcripts.get(app.selected) : [];
    fill(box, turns.length ? turns.map(turnView) : h('p', { class: 'muted' }, ctx
      ? `${app.selected} holds ${fmtInt(ctx.tokens)} tokens. Its next turn reuses them.`
      : 'Send a message to start a new context.'));
  }
  if (atBottom) box.scrollTop = box.scrollHeight;
}

function turnView(t) {
  return h('div', { class: `turn${t.pending ? ' pending' : ''}` },
    h('div', { class: 'user' }, t.user),
    t.reasoning ? h('div', { class: 'reasoning' }, t.reasoning) : null,
    h('div', { class: 'answer' }, t.answer || (t.pending ? '…' : '')),
    t.error ? h('div', { class: 'error' }, t.error) : null,
    t.stats ? statsView(t.stats) : null);
}

function statsView(st) {
  const parts = [];
  if (st.prompt !== null) parts.push(`prompt ${fmtInt(st.prompt)}: ${fmtInt(st.reused)} reused, ${fmtInt(st.computed)} computed`);
  if (st.completion !== null) parts.push(`${fmtInt(st.completion)} generated in ${fmtDuration(st.ms)}`);
  if (st.tokPerS !== null) parts.push(fmtRate(st.tokPerS));
  if (st.ttftMs !== null) parts.push(`first token ${fmtDuration(st.ttftMs)}`);
  return h('div', { class: 'turn-stats', data: { reused: st.reused ?? '', computed: st.computed ?? '' } }, parts.join(' · '));
}

// A turn changed: the transcript is drawn again at the next frame.
function redraw(app) {
  app.chat.version++;
  app.render();
}

// One turn on one context, streamed into its transcript.
async function runTurn(app, id, text) {
  const turn = app.transcripts.append(id, { user: text, answer: '', reasoning: '', pending: true, error: null, stats: null });
  redraw(app);
  app.chat.turns.add(id);
  const tSent = performance.now();
  let tFirst = null;
  let usage = null;
  try {
    const max = Math.max(1, Number($('#max-tokens').value) || 48);
    const res = await request('/v1/chat/completions', { method: 'POST', json: chatBody(id, text, max) });
    const parser = createSseParser((e) => {
      if (e.data === '[DONE]') return;
      const c = readChunk(JSON.parse(e.data));
      if ((c.content || c.reasoning) && tFirst === null) tFirst = performance.now();
      turn.answer += c.content;
      turn.reasoning += c.reasoning;
      if (c.usage) usage = c.usage;
      if (c.error) turn.error = c.error;
      redraw(app);
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.push(value);
    }
    parser.end();
  } catch (e) {
    turn.error = e.message;
  }
  turn.stats = turnStats(usage, tSent, tFirst, performance.now());
  turn.pending = false;
  app.chat.turns.delete(id);
  app.reload(); // the strip and figures of the grown context (loaded once it is no longer busy)
  redraw(app);
}

export function setupChat(app) {
  const send = async () => {
    const text = $('#prompt').value.trim();
    if (!text || app.chat.sending > 0) return;
    $('#prompt').value = '';
    app.chat.sending++;
    try {
      let targets = app.chat.compare?.branches;
      if (!targets) {
        if (!app.selected) app.select((await app.createContext('')).id);
        targets = [app.selected];
      }
      await Promise.all(targets.map((id) => runTurn(app, id, text)));
    } catch (e) {
      app.error(e);
    } finally {
      app.chat.sending--;
      redraw(app);
    }
  };
  $('#composer').addEventListener('submit', (e) => {
    e.preventDefault();
    send();
  });
  $('#prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      send();
    }
  });
  $('#fork-here').addEventListener('click', async () => {
    const base = app.selected;
    if (!base) return;
    try {
      const n = Math.max(2, Math.min(8, Number($('#branch-n').value) || 2));
      const res = await postJson(`/v1/contexts/${encodeURIComponent(base)}/fork?n=${n}`, {});
      const ids = res.branches.map((b) => b.id);
      app.madeHere(...ids);
      app.forked(base, ids);
      app.chat.compare = { base, branches: ids, from: app.transcripts.get(base).length };
      app.select(ids[0]);
      app.reload();
    } catch (e) {
      app.error(e);
    }
  });
  $('#single-view').addEventListener('click', () => {
    app.chat.compare = null;
    redraw(app);
  });
}
