// The page-sharing strip (web/js/lib/pages.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { holdersText, MAX_CELLS, recurrentModel, refClass, stripCounts, stripModel } from '../../../web/js/lib/pages.js';

test('refcount buckets', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 8, 9, 300].map(refClass), ['r1', 'r2', 'r3', 'r3', 'r4', 'r4', 'r5', 'r5']);
});

test('holders are named', () => {
  assert.equal(holdersText([]), 'held by this context only');
  assert.equal(holdersText(['ctx_1']), 'also held by ctx_1');
  assert.equal(holdersText(['ctx_1', 'ctx_3', 'prefix tree']), 'also held by ctx_1, ctx_3 and the prefix tree');
});

test('cells, divergence, released window pages', () => {
  const m = stripModel({
    id: 'ctx_2', tokens: 300,
    groups: [
      { kind: 'attention', window: 0, first_page: 0, divergence: 2,
        pages: [{ refs: 2, holders: ['ctx_1'] }, { refs: 3, holders: ['ctx_1', 'prefix tree'] }, { refs: 1, holders: [] }] },
      { kind: 'attention', window: 64, first_page: 2, divergence: null, pages: [{ refs: 1, holders: [] }] },
    ],
    recurrent: null,
  }, 64);
  const [full, win] = m.groups;
  assert.deepEqual(full.cells.map((c) => c.cls), ['r2', 'r3', 'r1']);
  assert.deepEqual(full.cells.map((c) => c.diverged), [false, false, true]);
  assert.match(full.cells[1].title, /^page 1 tokens 64-127: 3 refs, also held by ctx_1 and the prefix tree$/);
  assert.equal(full.label, 'group 0: full attention');
  assert.equal(win.label, 'group 1: window 64');
  assert.deepEqual(win.cells.map((c) => [c.index, c.cls]), [[0, 'released'], [1, 'released'], [2, 'r1']]);
  assert.deepEqual(stripCounts(m), { shared: 2, owned: 2, released: 2 });
});

test('a long context is cut at MAX_CELLS cells a group', () => {
  const pages = Array.from({ length: MAX_CELLS + 7 }, () => ({ refs: 1, holders: [] }));
  const g = stripModel({ id: 'x', tokens: 1, groups: [{ kind: 'attention', pages }] }, 64).groups[0];
  assert.equal(g.cells.length, MAX_CELLS);
  assert.equal(g.hidden, 7);
});

test('a recurrent state and its checkpoints are positions on the token line', () => {
  const r = recurrentModel({ state_position: 340, checkpoints: [64, 128, 339] }, 340);
  assert.equal(r.stateAt, 1);
  assert.deepEqual(r.checkpoints.map((c) => c.position), [64, 128, 339]);
  assert.equal(r.checkpoints[0].at, 64 / 340);
  assert.equal(recurrentModel(null, 5), null);
  const m = stripModel({ id: 'h', tokens: 10, groups: [], recurrent: { state_position: 10, checkpoints: [] } }, 64);
  assert.equal(m.recurrent.statePosition, 10);
});
