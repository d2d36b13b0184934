// Layout of the fork tree and the prefix tree (web/js/lib/tree.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { forkRows, guideText, pathTo, prefixRows, prefixStats } from '../../../web/js/lib/tree.js';

const ctxs = (...list) => new Map(list.map(([id, parent]) => [id, { id, parent }]));

test('forks nest under their parent, in id order (ctx_10 after ctx_9)', () => {
  const m = ctxs(['ctx_1', null], ['ctx_10', 'ctx_1'], ['ctx_9', 'ctx_1'], ['ctx_11', 'ctx_9'], ['ctx_2', null]);
  const rows = forkRows(m, 'ctx_11');
  assert.deepEqual(rows.map((r) => [r.id, r.depth]), [['ctx_1', 0], ['ctx_9', 1], ['ctx_11', 2], ['ctx_10', 1], ['ctx_2', 0]]);
  assert.deepEqual(rows.filter((r) => r.onPath).map((r) => r.id), ['ctx_1', 'ctx_9', 'ctx_11']);
  assert.deepEqual(rows.filter((r) => r.selected).map((r) => r.id), ['ctx_11']);
  assert.equal(rows[0].children, 2);
});

test('guides continue the lines of ancestors that have siblings below', () => {
  const m = ctxs(['ctx_1', null], ['ctx_2', 'ctx_1'], ['ctx_3', 'ctx_2'], ['ctx_4', 'ctx_1']);
  const g = Object.fromEntries(forkRows(m, null).map((r) => [r.id, guideText(r)]));
  assert.equal(g.ctx_1, '');
  assert.equal(g.ctx_2, '├─ ');
  assert.equal(g.ctx_3, '│  └─ ');
  assert.equal(g.ctx_4, '└─ ');
});

test('a context whose parent is gone is a root, marked', () => {
  const rows = forkRows(ctxs(['ctx_5', 'ctx_1']), null);
  assert.equal(rows[0].depth, 0);
  assert.equal(rows[0].orphan, true);
});

test('a parent cycle does not loop', () => {
  const m = ctxs(['a', 'b'], ['b', 'a']);
  assert.ok(forkRows(m, 'a').length <= 2);
  assert.deepEqual([...pathTo(m, 'a')], ['a', 'b']);
});

const tree = {
  id: 0, children: [
    { id: 1, checkpoint: true, children: [{ id: 2, children: [{ id: 3, children: [] }] }] },
    { id: 4, children: [] },
  ],
};

test('the prefix tree opens two levels at first, and remembers what the reader toggled', () => {
  const collapsed = new Set();
  const known = new Set();
  assert.deepEqual(prefixRows(tree, collapsed, known).map((r) => r.node.id), [0, 1, 2, 4]);
  collapsed.delete(2);
  assert.deepEqual(prefixRows(tree, collapsed, known).map((r) => [r.node.id, r.depth]), [[0, 0], [1, 1], [2, 2], [3, 3], [4, 1]]);
  collapsed.add(1);
  assert.deepEqual(prefixRows(tree, collapsed, known).map((r) => r.node.id), [0, 1, 4]);
  assert.equal(prefixRows(tree, collapsed, known)[1].open, false);
  assert.deepEqual(prefixRows(null, collapsed, known), []);
});

test('prefix counts', () => {
  assert.deepEqual(prefixStats(tree), { nodes: 5, checkpoints: 1 });
});
