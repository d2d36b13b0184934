// The page's model of the server: built from one GET /v1/state and kept current by the /v1/events
// stream (web/STATE_API.md). Pure: no DOM, runs under node; `now` is passed in.
//
// An event carries less than the state does (a fork names its children, not their shared pages), so
// applying one does what it can at once (the tree shows a fork within the frame) and asks for a reload of
// /v1/state, which the caller coalesces, to fill in the rest.

export function emptyModel() {
  return {
    eventId: 0, // the newest event reflected in this model; older ones are skipped
    loaded: false,
    stale: false, // the last snapshot was older than an event already applied, and was not applied
    server: null,
    pool: { pages: {}, bytes: {}, max_bytes: 0 },
    contexts: new Map(), // id -> the context as /v1/state describes it
    prefix: { root: null, truncated: false, hit_ratio: null, top: [] },
    counters: {},
    stats: { tokens_per_s: 0, requests_active: 0, queue: 0 },
    log: [], // the latest events, newest first: { id, type, data, at }
  };
}

export const LOG_LIMIT = 200;

// Replaces what the snapshot covers; keeps the browser's own history (the event log). A snapshot older
// than an event already applied raced that event: applying it would undo the event (a fork's new child
// would vanish from the tree for a moment, and a click on it be lost), so it is not applied, and it says
// so ({ stale: true }): the caller asks again. The answer after a stale one is applied whatever its id:
// asked for after the event was applied, it is newer, unless the server restarted and counts from 0
// again, and then it is the truth.
export function applyState(model, snap) {
  const id = Number(snap.event_id) || 0;
  if (model.loaded && id < model.eventId && !model.stale) {
    model.stale = true; // until the next snapshot
    return { stale: true };
  }
  model.loaded = true;
  model.stale = false;
  model.eventId = id;
  model.server = snap.server ?? model.server;
  model.pool = snap.pool ?? model.pool;
  // Merged with what was known: a context lent to a running request may be listed with fewer fields.
  model.contexts = new Map((snap.contexts ?? []).map((c) => [c.id, { ...model.contexts.get(c.id), ...c }]));
  model.prefix = snap.prefix_tree ?? model.prefix;
  model.counters = snap.counters ?? model.counters;
  return { stale: false };
}

// Applies one event { id, type, data }. Returns { skipped, refresh, resync }: refresh asks for a reload of
// /v1/state (soon, coalesced), resync for one at once (the stream lost events).
export function applyEvent(model, ev, now) {
  const id = Number(ev.id);
  if (ev.type === 'resync') {
    pushLog(model, ev, now);
    return { skipped: false, refresh: true, resync: true };
  }
  // Ids increase by one; an id at or below the model's was already seen (a resumed stream, or an event the
  // loaded state already reflects).
  if (Number.isFinite(id) && id > 0 && id <= model.eventId) return { skipped: true, refresh: false, resync: false };
  if (Number.isFinite(id) && id > 0) model.eventId = id;
  const d = ev.data ?? {};
  let refresh = true;
  switch (ev.type) {
    case 'context.created':
    case 'context.restored':
      addContext(model, { id: d.id, parent: null, tokens: d.tokens ?? 0, pages: d.pages ?? 0 }, now);
      if (ev.type === 'context.restored') bump(model.counters, 'restores');
      break;
    case 'context.forked': {
      const parent = model.contexts.get(d.parent);
      for (const child of d.children ?? []) {
        addContext(model, {
          id: child,
          parent: d.parent,
          tokens: parent?.tokens ?? 0,
          pages: parent?.pages ?? 0,
          // A fork shares every page of its parent, and the parent now shares them all too.
          pages_shared: parent?.pages ?? 0,
          pages_owned: 0,
          state_position: parent?.state_position ?? null,
          checkpoints: parent?.checkpoints ?? [],
        }, now);
      }
      if (parent) {
        parent.pages_shared = parent.pages;
        parent.pages_owned = 0;
      }
      bump(model.counters, 'forks', (d.children ?? []).length);
      break;
    }
    case 'context.deleted':
      model.contexts.delete(d.id);
      break;
    case 'context.updated': {
      const c = model.contexts.get(d.id);
      if (c) {
        c.tokens = d.tokens ?? c.tokens;
        c.last_used_ms = now;
        c.busy = false; // the session came back from its turn
      }
      break;
    }
    case 'context.snapshotted':
      bump(model.counters, 'snapshots');
      refresh = false;
      break;
    case 'pool.changed':
      if (d.pages) model.pool = { ...model.pool, pages: d.pages };
      refresh = false;
      break;
    case 'stats':
      model.stats = { tokens_per_s: d.tokens_per_s ?? 0, requests_active: d.requests_active ?? 0, queue: d.queue ?? 0 };
      if (d.pool) model.pool = { ...model.pool, pages: d.pool };
      refresh = false;
      break;
    case 'tree.changed':
      break; // the tree summary only comes whole, with /v1/state
    default:
      refresh = false; // an event type this page does not know: the contract lets the server add some
  }
  // The 1 Hz tick would push everything else out of the log; it shows in the stats line instead.
  if (ev.type !== 'stats') pushLog(model, ev, now);
  return { skipped: false, refresh, resync: false };
}

function addContext(model, c, now) {
  if (!c.id) return;
  const old = model.contexts.get(c.id);
  model.contexts.set(c.id, {
    pages_shared: 0,
    pages_owned: c.pages ?? 0,
    created_ms: now,
    last_used_ms: now,
    busy: false,
    state_position: null,
    checkpoints: [],
    ...old,
    ...c,
  });
}

function bump(counters, key, by = 1) {
  counters[key] = (counters[key] ?? 0) + by;
}

function pushLog(model, ev, now) {
  model.log.unshift({ id: ev.id, type: ev.type, data: ev.data ?? {}, at: now });
  if (model.log.length > LOG_LIMIT) model.log.length = LOG_LIMIT;
}

// One line for the event log.
export function describeEvent(type, d) {
  switch (type) {
    case 'context.created': return `${d.id} created, ${d.tokens} tokens, ${d.pages} pages`;
    case 'context.forked': return `${d.parent} forked into ${(d.children ?? []).join(', ')}`;
    case 'context.deleted': return `${d.id} deleted`;
    case 'context.snapshotted': return `${d.id} snapshotted, ${d.bytes} bytes`;
    case 'context.restored': return `${d.id} restored, ${d.tokens} tokens`;
    case 'context.updated': return `${d.id} now ${d.tokens} tokens`;
    case 'tree.changed': return `prefix tree: ${d.entries} entries, ${d.nodes} nodes`;
    case 'pool.changed': return `pool: ${d.pages?.free ?? '?'} pages free`;
    case 'resync': return 'events were missed: state reloaded';
    default: return JSON.stringify(d).slice(0, 120);
  }
}
