// Server facts (model, layer groups, KV settings, version, flags, counters) and the event log.

import { $, changed, fill, h } from '../dom.js';
import { describeEvent } from '../lib/state.js';
import { fmtBytes, fmtInt } from '../lib/format.js';

export function renderInfo(app) {
  const sv = app.model.server;
  if (!sv || !changed('info', sv, app.model.counters)) return;
  const kv = sv.kv ?? {};
  const groups = (sv.layer_groups ?? []).map((g) =>
    `${g.layers} × ${g.kind}${g.window ? ` (window ${g.window})` : ''}`).join(', ');
  const flags = Object.entries(sv.flags ?? {}).map(([k, v]) => `${k}=${v}`).join(' ');
  const counters = Object.entries(app.model.counters ?? {}).map(([k, v]) => `${k.replace(/_/g, ' ')} ${fmtInt(v)}`).join(' · ');
  const items = [
    ['model', sv.model], ['architecture', sv.architecture], ['layer groups', groups],
    ['KV', `${kv.page_tokens} tokens a page, ${kv.precision}, ${fmtBytes(kv.page_bytes)} a page, budget ${fmtBytes(kv.memory_bytes)}`],
    ['context size', fmtInt(sv.ctx_size)], ['version', sv.version], ['flags', flags || '—'], ['since start', counters],
  ];
  fill($('#info-list'), items.map(([k, v]) => [h('dt', null, k), h('dd', null, v ?? '—')]),
    h('dt', null, 'metrics'), h('dd', null, h('a', { href: sv.metrics ?? '/metrics' }, sv.metrics ?? '/metrics')));
  $('#metrics-link').href = sv.metrics ?? '/metrics';
  $('#model').textContent = `${sv.model} · ${sv.architecture}`;
}

export function renderEvents(app) {
  if (!changed('events', app.model.log[0])) return;
  const log = app.model.log.slice(0, 60);
  fill($('#event-log'), log.length ? log.map((e) => h('li', { data: { type: e.type } },
    h('time', null, new Date(e.at).toLocaleTimeString()), h('span', { class: 'etype' }, e.type),
    describeEvent(e.type, e.data))) : h('li', { class: 'muted' }, 'No event yet.'));
}
