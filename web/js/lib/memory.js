// Memory accounting for the pool bar and the sparkline kept in the browser. Pure: no DOM, runs under node.

// The bar's segments, left to right. The pool's pages are free + unique + shared + prefix_only; evictable
// counts those of the prefix tree's pages that eviction could free, so it is drawn as a part of
// prefix_only (clamped: the contract does not promise it is a subset).
export function segments(pool) {
  const p = pool?.pages ?? {};
  const b = pool?.bytes ?? {};
  const prefix = p.prefix_only ?? 0;
  const evictable = Math.min(p.evictable ?? 0, prefix);
  const seg = [
    { key: 'unique', label: 'unique', pages: p.unique ?? 0, bytes: b.unique },
    { key: 'shared', label: 'shared', pages: p.shared ?? 0, bytes: b.shared },
    { key: 'prefix', label: 'prefix tree, kept', pages: prefix - evictable, bytes: sub(b.prefix_only, b.evictable) },
    { key: 'evictable', label: 'prefix tree, evictable', pages: evictable, bytes: b.evictable },
    { key: 'free', label: 'free', pages: p.free ?? 0, bytes: b.free },
  ];
  const total = seg.reduce((s, x) => s + x.pages, 0);
  for (const s of seg) s.frac = total > 0 ? s.pages / total : 0;
  return { seg, total, used: total - (p.free ?? 0), states: b.states ?? 0, maxBytes: pool?.max_bytes ?? 0 };
}

function sub(a, b) {
  return Number.isFinite(a) ? Math.max(0, a - (Number.isFinite(b) ? b : 0)) : undefined;
}

// A fixed-size series of samples, oldest first: the sparkline's memory.
export function createSeries(capacity = 120) {
  const values = [];
  return {
    push(v) {
      values.push(v);
      if (values.length > capacity) values.shift();
    },
    values: () => values.slice(),
    capacity,
  };
}

// The sparkline's SVG path over a width x height box: the last sample at the right edge, `max` at the
// top (the pool's size, so that the line shows how full the pool is, not just its shape).
export function sparkPath(values, width, height, max) {
  if (values.length === 0) return '';
  const top = max > 0 ? max : Math.max(...values, 1);
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const y = (v) => (height - (Math.min(v, top) / top) * height).toFixed(1);
  return values.map((v, i) => `${i === 0 ? 'M' : 'L'}${(i * step).toFixed(1)},${y(v)}`).join(' ');
}
