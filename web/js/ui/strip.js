// The page-sharing strip of the selected context: per layer group one row of cells, one per KV page,
// coloured by refcount, with the divergence point from its parent; the recurrent state and its
// checkpoints on their own line, as positions (a state is not paged).

import { $, changed, fill, h, s } from '../dom.js';
import { REF_LEGEND, stripCounts } from '../lib/pages.js';
import { fmtInt } from '../lib/format.js';

// The cell under the pointer ({ id, group, index }): a strip redrawn by a live update keeps saying who
// holds it, rather than going back to the hint while the pointer has not moved.
let hovered = null;

function hoverText(m) {
  if (!m || !hovered || hovered.id !== m.id) return null;
  const g = m.groups.find((x) => x.label === hovered.group);
  return g?.cells.find((c) => c.index === hovered.index)?.title ?? null;
}

export function renderStrip(app) {
  const m = app.strip;
  if (!changed('strip', m, app.selected)) return;
  $('#strip-id').textContent = app.selected ?? '—';
  $('#strip-hover').textContent = hoverText(m) ?? 'Hover a page to see who else holds it.';
  if (!m || m.id !== app.selected) {
    $('#strip-sum').textContent = '';
    fill($('#strip-body'), h('p', { class: 'muted' }, app.selected ? 'loading…' : 'Select a context.'));
    return;
  }
  const n = stripCounts(m);
  $('#strip-sum').textContent = `${fmtInt(m.tokens)} tokens · ${n.shared} shared, ${n.owned} own` +
    (n.released ? `, ${n.released} released` : '');
  fill($('#strip-body'),
    m.groups.map((g) => h('div', { class: 'group', data: { kind: g.kind } },
      h('div', { class: 'group-label' }, g.label),
      h('div', { class: 'cells' }, g.cells.map((c) => [
        c.index === g.divergence ? h('span', { class: 'divergence', title: `diverges from the parent at page ${c.index}` }) : null,
        h('span', { class: `cell ${c.cls}${c.diverged ? ' diverged' : ''}`, title: c.title, data: { refs: c.refs, index: c.index },
          onmouseenter: () => {
            hovered = { id: m.id, group: g.label, index: c.index };
            $('#strip-hover').textContent = c.title;
          } }),
      ]), g.hidden > 0 ? h('span', { class: 'muted' }, ` … ${g.hidden} more`) : null))),
    m.recurrent ? recurrentLine(m.recurrent) : null,
    m.groups.length === 0 && !m.recurrent ? h('p', { class: 'muted' }, 'No pages yet.') : null);
  fill($('#strip-legend'), REF_LEGEND.map(([cls, label]) => h('span', null, h('span', { class: `cell ${cls}` }), label)),
    h('span', null, h('span', { class: 'divergence' }), 'diverges from the parent'),
    h('span', null, h('span', { class: 'cell released' }), 'released by the window'));
}

// The recurrent state: a line over the token positions, a tick per checkpoint, a dot for the live state.
function recurrentLine(r) {
  const W = 600;
  const x = (f) => (f * (W - 8) + 4).toFixed(1);
  return h('div', { class: 'group recurrent', data: { kind: 'recurrent' } },
    h('div', { class: 'group-label' }, `recurrent state at ${r.statePosition ?? '—'}, ${r.checkpoints.length} checkpoint${r.checkpoints.length === 1 ? '' : 's'}`),
    s('svg', { class: 'rec-line', viewBox: `0 0 ${W} 20`, preserveAspectRatio: 'none' },
      s('line', { x1: 4, y1: 10, x2: W - 4, y2: 10, class: 'axis' }),
      r.checkpoints.map((c) => s('rect', { x: x(c.at) - 2, y: 3, width: 4, height: 14, class: 'ckpt' },
        s('title', null, `checkpoint after ${c.position} tokens`))),
      r.statePosition !== null ? s('circle', { cx: x(r.stateAt), cy: 10, r: 5, class: 'state' },
        s('title', null, `live state after ${r.statePosition} tokens`)) : null));
}
