// The prefix tree as a collapsible table (the server's bounded summary), its hit ratio and top prefixes.

import { $, changed, fill, h } from '../dom.js';
import { prefixRows, prefixStats } from '../lib/tree.js';
import { fmtAgo, fmtInt, fmtPercent, showText } from '../lib/format.js';

const collapsed = new Set();
const known = new Set();
let toggles = 0;

export function renderPrefix(app, now) {
  const p = app.model.prefix ?? {};
  // Redrawn when the tree or a toggle changed, and every 10 s for the "last hit" ages.
  if (!changed('prefix', p, toggles, Math.floor(now / 10000))) return;
  const st = prefixStats(p.root);
  $('#prefix-sum').textContent = `${fmtInt(st.nodes)} nodes` + (st.checkpoints ? `, ${st.checkpoints} with a checkpoint` : '') +
    (p.hit_ratio !== null && p.hit_ratio !== undefined ? ` · hit ratio ${fmtPercent(p.hit_ratio)}` : '');
  $('#prefix-truncated').hidden = !p.truncated;
  fill($('#prefix-rows'), prefixRows(p.root, collapsed, known).map(({ node: n, depth, hasChildren, open }) => {
    const toggle = hasChildren
      ? h('button', { class: 'twisty', type: 'button', 'aria-expanded': String(open),
        onclick: () => {
          open ? collapsed.add(n.id) : collapsed.delete(n.id);
          toggles++;
          app.render();
        } }, open ? '▾' : '▸')
      : h('span', { class: 'twisty' });
    const label = h('td', { class: 'prefix-text', title: n.preview }, toggle,
      depth === 0 ? h('i', null, 'root') : n.preview ? showText(n.preview, 40) : h('i', { class: 'muted' }, 'no text'));
    label.style.paddingLeft = `${depth * 14}px`;
    return h('tr', { class: `prefix-row${n.hits > 0 ? ' hit' : ''}`, data: { id: n.id, hits: n.hits } }, label,
      h('td', { class: 'num' }, fmtInt(n.tokens)), h('td', { class: 'num' }, fmtInt(n.pages)),
      h('td', { class: 'num prefix-hits' }, fmtInt(n.hits)), h('td', { class: 'num' }, fmtAgo(n.last_hit_ms, now)),
      h('td', null, n.checkpoint ? h('span', { class: 'tag', title: 'holds a recurrent checkpoint' }, 'ckpt') : null,
        n.pinned ? h('span', { class: 'tag', title: 'pinned (llamay_retain_prefix)' }, 'pinned') : null,
        n.entry ? h('span', { class: 'tag', title: 'an entry: holds its own pages' }, 'entry') : null,
        n.children_total > (n.children ?? []).length
          ? h('span', { class: 'tag', title: 'children the server left out' }, `+${n.children_total - n.children.length} more`) : null));
  }));
  fill($('#prefix-top'), (p.top ?? []).map((t) => h('li', { title: t.preview },
    h('span', { class: 'prefix-text' }, showText(t.preview, 36)), ` ${fmtInt(t.tokens)} tok, ${fmtInt(t.hits)} hits`)));
  if (!(p.top ?? []).length) fill($('#prefix-top'), h('li', { class: 'muted' }, 'none yet'));
}
