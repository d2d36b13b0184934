// The page's model (web/js/lib/state.js): a /v1/state snapshot, then events applied in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyEvent, applyState, describeEvent, emptyModel, LOG_LIMIT } from '../../../web/js/lib/state.js';

const snap = () => ({
  event_id: 10,
  server: { model: 'demo', architecture: 'llama', kv: { page_tokens: 64 } },
  pool: { pages: { free: 90, unique: 4, shared: 2, prefix_only: 4, evictable: 3 }, bytes: {}, max_bytes: 1 << 20 },
  contexts: [{ id: 'ctx_1', parent: null, tokens: 130, pages: 3, pages_shared: 0, pages_owned: 3, created_ms: 1, last_used_ms: 2 }],
  prefix_tree: { root: { id: 0, children: [] }, truncated: false, hit_ratio: 0.5, top: [] },
  counters: { forks: 0, restores: 0, snapshots: 0 },
});

test('a snapshot fills the model', () => {
  const m = emptyModel();
  applyState(m, snap());
  assert.equal(m.eventId, 10);
  assert.equal(m.contexts.get('ctx_1').tokens, 130);
  assert.equal(m.server.model, 'demo');
});

test('a fork adds children sharing every page of the parent, at once', () => {
  const m = emptyModel();
  applyState(m, snap());
  const r = applyEvent(m, { id: 11, type: 'context.forked', data: { parent: 'ctx_1', children: ['ctx_2', 'ctx_3'] } }, 1000);
  assert.equal(r.refresh, true);
  for (const id of ['ctx_2', 'ctx_3']) {
    const c = m.contexts.get(id);
    assert.equal(c.parent, 'ctx_1');
    assert.equal(c.pages_shared, 3);
    assert.equal(c.pages_owned, 0);
    assert.equal(c.created_ms, 1000);
  }
  assert.equal(m.contexts.get('ctx_1').pages_shared, 3);
  assert.equal(m.counters.forks, 2);
});

test('events already reflected are skipped, later ones advance the id', () => {
  const m = emptyModel();
  applyState(m, snap());
  assert.equal(applyEvent(m, { id: 9, type: 'context.deleted', data: { id: 'ctx_1' } }, 0).skipped, true);
  assert.ok(m.contexts.has('ctx_1'));
  applyEvent(m, { id: 11, type: 'context.deleted', data: { id: 'ctx_1' } }, 0);
  assert.equal(m.contexts.size, 0);
  assert.equal(m.eventId, 11);
});

test('create, restore, update, snapshot', () => {
  const m = emptyModel();
  applyState(m, snap());
  applyEvent(m, { id: 11, type: 'context.created', data: { id: 'ctx_5', tokens: 3, pages: 1 } }, 50);
  applyEvent(m, { id: 12, type: 'context.restored', data: { id: 'ctx_6', tokens: 130 } }, 60);
  applyEvent(m, { id: 13, type: 'context.updated', data: { id: 'ctx_5', tokens: 40 } }, 70);
  const r = applyEvent(m, { id: 14, type: 'context.snapshotted', data: { id: 'ctx_5', bytes: 9 } }, 80);
  assert.equal(r.refresh, false);
  assert.equal(m.contexts.get('ctx_5').tokens, 40);
  assert.equal(m.contexts.get('ctx_5').last_used_ms, 70);
  assert.equal(m.contexts.get('ctx_6').tokens, 130);
  assert.equal(m.counters.restores, 1);
  assert.equal(m.counters.snapshots, 1);
  assert.deepEqual(m.log.map((e) => e.type), ['context.snapshotted', 'context.updated', 'context.restored', 'context.created']);
});

test('pool changes and stats ticks update the pool without a reload; stats stay out of the log', () => {
  const m = emptyModel();
  applyState(m, snap());
  const pages = { free: 80, unique: 10, shared: 6, prefix_only: 4, evictable: 4 };
  assert.equal(applyEvent(m, { id: 11, type: 'pool.changed', data: { pages } }, 0).refresh, false);
  assert.deepEqual(m.pool.pages, pages);
  applyEvent(m, { id: 12, type: 'stats', data: { tokens_per_s: 12.5, requests_active: 1, queue: 0, pool: { ...pages, free: 79 } } }, 0);
  assert.equal(m.pool.pages.free, 79);
  assert.equal(m.stats.tokens_per_s, 12.5);
  assert.equal(m.pool.max_bytes, 1 << 20, 'what the event does not carry stays');
  assert.deepEqual(m.log.map((e) => e.type), ['pool.changed']);
});

test('resync asks for a reload whatever its id; tree changes ask for one soon', () => {
  const m = emptyModel();
  applyState(m, snap());
  assert.deepEqual(applyEvent(m, { id: 3, type: 'resync', data: {} }, 0), { skipped: false, refresh: true, resync: true });
  assert.equal(applyEvent(m, { id: 11, type: 'tree.changed', data: { entries: 2, nodes: 3, bytes: 10 } }, 0).refresh, true);
  assert.equal(applyEvent(m, { id: 12, type: 'something.new', data: {} }, 0).refresh, false);
});

test('a snapshot older than an applied event is not applied; the next answer is, whatever its id', () => {
  const m = emptyModel();
  applyState(m, snap());
  applyEvent(m, { id: 12, type: 'context.deleted', data: { id: 'ctx_1' } }, 0);
  assert.equal(applyState(m, snap()).stale, true);
  assert.equal(m.stale, true, 'the model says so until the next snapshot');
  assert.equal(m.contexts.has('ctx_1'), false, 'the event the snapshot raced is not undone');
  assert.equal(m.eventId, 12);
  applyEvent(m, { id: 13, type: 'context.created', data: { id: 'ctx_2', tokens: 99, pages: 2 } }, 0);
  assert.equal(m.contexts.get('ctx_2')?.tokens, 99, 'events still apply meanwhile');
  assert.equal(applyState(m, { ...snap(), event_id: 14 }).stale, false);
  assert.equal(m.stale, false);
  assert.equal(m.eventId, 14);
  assert.equal(m.contexts.has('ctx_1'), true, 'the newer snapshot is the truth');
  applyEvent(m, { id: 15, type: 'context.deleted', data: { id: 'ctx_1' } }, 0);
  assert.equal(applyState(m, snap()).stale, true);
  assert.equal(applyState(m, snap()).stale, false, 'a server that restarted does not make every reload stale');
  assert.equal(m.eventId, 10, 'the restarted server counts from its own ids');
  assert.equal(m.contexts.has('ctx_1'), true);
});

test('the log is bounded', () => {
  const m = emptyModel();
  for (let i = 1; i <= LOG_LIMIT + 50; i++) applyEvent(m, { id: i, type: 'tree.changed', data: {} }, i);
  assert.equal(m.log.length, LOG_LIMIT);
  assert.equal(m.log[0].id, LOG_LIMIT + 50);
});

test('event descriptions', () => {
  assert.equal(describeEvent('context.forked', { parent: 'ctx_1', children: ['ctx_2', 'ctx_3'] }), 'ctx_1 forked into ctx_2, ctx_3');
  assert.equal(describeEvent('context.deleted', { id: 'ctx_4' }), 'ctx_4 deleted');
});
