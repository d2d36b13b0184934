// The live connection to /v1/events. EventSource where no API key is set (it resumes by itself with
// Last-Event-ID); with a key, fetch() and a streaming reader, since EventSource cannot send a header, and
// the page resumes by sending Last-Event-ID itself. While the stream is down the page reloads /v1/state
// every 2 s, and once more when the stream is back (events between the last poll and the new stream would
// otherwise be missed).

import { apiKey, authHeaders } from './api.js';
import { createSseParser } from './lib/sse.js';

export const EVENT_TYPES = ['context.created', 'context.forked', 'context.deleted', 'context.snapshotted',
  'context.restored', 'context.updated', 'tree.changed', 'pool.changed', 'stats', 'resync'];
const POLL_MS = 2000;

// opts: { onEvent(ev), onStatus('live' | 'polling'), reload(): Promise, lastId(): number }
export function connect(opts) {
  let stopped = false;
  let live = false;
  let poller = null;
  let source = null;
  let abort = null;
  let retryTimer = null;

  const up = () => {
    if (!live) {
      live = true;
      clearInterval(poller);
      poller = null;
      opts.onStatus('live');
      opts.reload();
    }
  };
  const down = () => {
    if (stopped) return;
    if (live || !poller) {
      live = false;
      opts.onStatus('polling');
      opts.reload();
      clearInterval(poller);
      poller = setInterval(() => opts.reload(), POLL_MS);
    }
  };
  const deliver = (type, id, data) => {
    let parsed = {};
    try {
      parsed = data ? JSON.parse(data) : {};
    } catch {}
    opts.onEvent({ id: Number(id), type, data: parsed });
  };

  function viaEventSource() {
    source = new EventSource('/v1/events');
    source.onopen = up;
    for (const t of EVENT_TYPES) source.addEventListener(t, (e) => deliver(t, e.lastEventId, e.data));
    source.onerror = () => {
      down();
      // CLOSED: the server answered with an error status, so EventSource will not retry: start over (a new
      // EventSource cannot send Last-Event-ID, but the state reload on open covers the gap).
      if (source.readyState === EventSource.CLOSED) retry(viaEventSource);
    };
  }

  async function viaFetch() {
    abort = new AbortController();
    try {
      const headers = authHeaders({ Accept: 'text/event-stream' });
      const last = opts.lastId();
      if (last > 0) headers['Last-Event-ID'] = String(last);
      const res = await fetch('/v1/events', { headers, signal: abort.signal });
      if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
      up();
      const parser = createSseParser((e) => deliver(e.event, e.id, e.data));
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.push(value);
      }
    } catch {}
    if (stopped) return;
    down();
    retry(viaFetch);
  }

  function retry(fn) {
    clearTimeout(retryTimer);
    retryTimer = setTimeout(() => !stopped && fn(), 1000);
  }

  down(); // the first state load, and polling until the stream opens
  if (apiKey.get()) viaFetch();
  else viaEventSource();

  return {
    stop() {
      stopped = true;
      clearInterval(poller);
      clearTimeout(retryTimer);
      source?.close();
      abort?.abort();
    },
  };
}
