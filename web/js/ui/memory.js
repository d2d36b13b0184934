// The pool bar (free, unique, shared, prefix-tree-only, evictable; pages and bytes) and the sparkline of
// pages in use, sampled by the browser at each stats tick.

import { $, fill, h, s } from '../dom.js';
import { segments, sparkPath } from '../lib/memory.js';
import { fmtBytes, fmtInt } from '../lib/format.js';

export function renderMemory(app) {
  const m = segments(app.model.pool);
  fill($('#membar'), m.seg.map((x) => {
    const el = h('span', { class: `seg ${x.key}`, title: `${x.label}: ${fmtInt(x.pages)} pages` });
    el.style.flexGrow = String(x.pages); // CSSOM, which the CSP allows (a style attribute it would not)
    el.style.minWidth = x.pages > 0 ? '3px' : '0'; // 30 pages of 32,768 still show
    return el;
  }));
  fill($('#memlegend'),
    m.seg.map((x) => h('span', { class: `mem-${x.key}`, data: { pages: x.pages } },
      h('i', { class: `swatch ${x.key}` }), `${x.label} `, h('b', null, fmtInt(x.pages)),
      x.bytes !== undefined ? ` (${fmtBytes(x.bytes)})` : '')),
    h('span', null, `in use `, h('b', { id: 'mem-used' }, fmtInt(m.used)), ` of ${fmtInt(m.total)} pages`),
    m.states ? h('span', null, `recurrent states ${fmtBytes(m.states)}`) : null,
    m.maxBytes ? h('span', null, `budget ${fmtBytes(m.maxBytes)}`) : null);
  // Scaled to the peak, not the pool: a few pages in use out of thousands would be a flat line.
  const values = app.series.values();
  const peak = Math.max(0, ...values);
  fill($('#spark'), s('path', { d: sparkPath(values, 160, 32, Math.max(1, peak * 1.25)), class: 'spark-line' }),
    s('title', null, `pages in use over ${values.length} samples: peak ${fmtInt(peak)} of ${fmtInt(m.total)}`));
}
