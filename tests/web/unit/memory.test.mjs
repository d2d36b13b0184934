// Memory accounting and the sparkline (web/js/lib/memory.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSeries, segments, sparkPath } from '../../../web/js/lib/memory.js';

test('segments: evictable is the part of prefix-only that eviction can free', () => {
  const m = segments({
    pages: { free: 50, unique: 20, shared: 10, prefix_only: 20, evictable: 15 },
    bytes: { free: 500, unique: 200, shared: 100, prefix_only: 200, evictable: 150, states: 7 },
    max_bytes: 1000,
  });
  assert.deepEqual(m.seg.map((s) => [s.key, s.pages, s.bytes]),
    [['unique', 20, 200], ['shared', 10, 100], ['prefix', 5, 50], ['evictable', 15, 150], ['free', 50, 500]]);
  assert.equal(m.total, 100);
  assert.equal(m.used, 50);
  assert.equal(m.states, 7);
  assert.equal(m.seg.reduce((s, x) => s + x.frac, 0), 1);
});

test('evictable beyond prefix-only is clamped; an empty pool has no fractions', () => {
  const m = segments({ pages: { free: 0, unique: 0, shared: 0, prefix_only: 2, evictable: 5 } });
  assert.equal(m.seg.find((s) => s.key === 'evictable').pages, 2);
  assert.equal(m.seg.find((s) => s.key === 'prefix').pages, 0);
  assert.deepEqual(segments({}).seg.map((s) => s.frac), [0, 0, 0, 0, 0]);
});

test('the series keeps the last samples', () => {
  const s = createSeries(3);
  for (const v of [1, 2, 3, 4, 5]) s.push(v);
  assert.deepEqual(s.values(), [3, 4, 5]);
});

test('sparkline path: the pool size at the top, the last sample at the right edge', () => {
  assert.equal(sparkPath([], 100, 10, 4), '');
  assert.equal(sparkPath([0, 2, 4], 100, 10, 4), 'M0.0,10.0 L50.0,5.0 L100.0,0.0');
  assert.equal(sparkPath([8], 100, 10, 4), 'M0.0,0.0');
});
