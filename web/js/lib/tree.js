// Layout of the two trees the page draws as indented rows: the fork tree of held contexts and the prefix
// tree. Pure: no DOM, runs under node.

import { compareIds } from './format.js';

// The fork tree as rows in display order. A context whose parent is no longer held is a root (marked
// `orphan`: its pages may still be shared with what the parent left in the prefix tree).
// Each row: { id, ctx, depth, guides, last, children, onPath, selected, orphan }. `guides[i]` says whether
// the ancestor at depth i+1 has siblings below, so a vertical line continues there.
export function forkRows(contexts, selectedId) {
  const kids = new Map();
  const roots = [];
  for (const c of contexts.values()) {
    if (c.parent && contexts.has(c.parent)) {
      if (!kids.has(c.parent)) kids.set(c.parent, []);
      kids.get(c.parent).push(c);
    } else {
      roots.push(c);
    }
  }
  const order = (a, b) => compareIds(a.id, b.id);
  const path = pathTo(contexts, selectedId);
  const rows = [];
  const seen = new Set();
  const walk = (c, depth, guides, last) => {
    if (seen.has(c.id)) return; // a parent cycle would be a server bug; never loop on it
    seen.add(c.id);
    const children = (kids.get(c.id) ?? []).sort(order);
    rows.push({
      id: c.id, ctx: c, depth, guides, last, children: children.length,
      onPath: path.has(c.id), selected: c.id === selectedId, orphan: Boolean(c.parent) && !contexts.has(c.parent),
    });
    children.forEach((k, i) => walk(k, depth + 1, depth === 0 ? [] : [...guides, !last], i === children.length - 1));
  };
  roots.sort(order).forEach((r) => walk(r, 0, [], true));
  return rows;
}

// The ids from the root of the selected context's fork tree down to it.
export function pathTo(contexts, id) {
  const path = new Set();
  for (let c = contexts.get(id); c && !path.has(c.id); c = contexts.get(c.parent)) path.add(c.id);
  return path;
}

// The connector drawn before a row's label, in box-drawing characters: "│  ├─ " and so on.
export function guideText(row) {
  if (row.depth === 0) return '';
  return row.guides.map((more) => (more ? '│  ' : '   ')).join('') + (row.last ? '└─ ' : '├─ ');
}

// The prefix tree's visible rows: a node's children are shown unless its id is in `collapsed`. Nodes
// below `openDepth` start collapsed the first time they are seen (`known` remembers which were seen), so
// a deep tree opens a level at a time and a reader's choices survive reloads.
export function prefixRows(root, collapsed, known, openDepth = 2) {
  const rows = [];
  if (!root) return rows;
  const walk = (n, depth) => {
    const kids = n.children ?? [];
    if (!known.has(n.id)) {
      known.add(n.id);
      if (depth >= openDepth && kids.length > 0) collapsed.add(n.id);
    }
    const open = !collapsed.has(n.id);
    rows.push({ node: n, depth, hasChildren: kids.length > 0, open });
    if (open) for (const k of kids) walk(k, depth + 1);
  };
  walk(root, 0);
  return rows;
}

// Counts over the whole summary: nodes, and those holding a checkpoint.
export function prefixStats(root) {
  let nodes = 0;
  let checkpoints = 0;
  const walk = (n) => {
    nodes++;
    if (n.checkpoint) checkpoints++;
    for (const k of n.children ?? []) walk(k);
  };
  if (root) walk(root);
  return { nodes, checkpoints };
}
