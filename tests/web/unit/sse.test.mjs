// The SSE parser (web/js/lib/sse.js): the event-stream format as a server may split it across chunks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSseParser } from '../../../web/js/lib/sse.js';

function parse(chunks) {
  const events = [];
  const p = createSseParser((e) => events.push(e));
  for (const c of chunks) p.push(c);
  p.end();
  return events;
}

test('events with ids, types and data', () => {
  const ev = parse(['id: 1\nevent: context.created\ndata: {"id":"ctx_1"}\n\n', 'id: 2\nevent: stats\ndata: {}\n\n']);
  assert.deepEqual(ev.map((e) => [e.id, e.event, e.data]), [['1', 'context.created', '{"id":"ctx_1"}'], ['2', 'stats', '{}']]);
});

test('a chunk boundary anywhere gives the same events', () => {
  const text = 'id: 7\r\nevent: a\r\ndata: x\r\ndata: y\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n';
  const whole = parse([text]);
  assert.deepEqual(whole.map((e) => e.data), ['x\ny', '[DONE]']);
  for (let i = 1; i < text.length; i++) assert.deepEqual(parse([text.slice(0, i), text.slice(i)]), whole, `split at ${i}`);
  assert.deepEqual(parse([...text]), whole, 'one character a chunk');
});

test('the id persists to later events, default type is message, comments are ignored', () => {
  const ev = parse([': hello\n\nid: 5\ndata: a\n\ndata: b\n\n']);
  assert.deepEqual(ev.map((e) => [e.id, e.event]), [['5', 'message'], ['5', 'message']]);
});

test('an event cut off by the end of the stream is dropped; bare CR ends lines; retry is read', () => {
  const ev = parse(['retry: 3000\rdata: one\r\rdata: cut']);
  assert.equal(ev.length, 1);
  assert.equal(ev[0].data, 'one');
  assert.equal(ev[0].retry, 3000);
});

test('a field without a colon, and a value without the space', () => {
  const ev = parse(['data\n\ndata:x\n\n']);
  assert.deepEqual(ev.map((e) => e.data), ['', 'x']);
});
