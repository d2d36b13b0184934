// Formatting (web/js/lib/format.js) and chat turns (web/js/lib/turns.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compareIds, fmtAgo, fmtBytes, fmtDuration, fmtInt, fmtPercent, fmtRate, showText } from '../../../web/js/lib/format.js';
import { chatBody, createTranscripts, readChunk, turnStats } from '../../../web/js/lib/turns.js';

test('sizes, counts, times', () => {
  assert.equal(fmtBytes(512), '512 B');
  assert.equal(fmtBytes(1536), '1.50 KiB');
  assert.equal(fmtBytes(1073741824), '1.00 GiB');
  assert.equal(fmtBytes(131072), '128 KiB');
  assert.equal(fmtInt(12345), '12,345');
  assert.equal(fmtInt(null), '-');
  assert.equal(fmtDuration(850), '850 ms');
  assert.equal(fmtDuration(4200), '4.2 s');
  assert.equal(fmtDuration(125000), '2 min');
  assert.equal(fmtDuration(3 * 86400e3), '3 d');
  assert.equal(fmtAgo(null, 5), 'never');
  assert.equal(fmtAgo(1000, 31000), '30 s ago');
  assert.equal(fmtRate(7.25), '7.3 tok/s');
  assert.equal(fmtPercent(0.75), '75%');
});

test('previews show newlines and control characters, and are cut', () => {
  assert.equal(showText('a\nb\tc\x01'), 'a↵b→c·');
  assert.equal(showText('  '), '␣␣');
  assert.equal(showText(' a '), ' a ');
  assert.equal(showText('x'.repeat(60), 10), `${'x'.repeat(9)}…`);
});

test('context ids sort by number', () => {
  assert.deepEqual(['ctx_10', 'resp_a', 'ctx_2', 'ctx_1'].sort(compareIds), ['ctx_1', 'ctx_2', 'ctx_10', 'resp_a']);
});

test('a session turn sends only its message and asks for usage', () => {
  const b = chatBody('ctx_3', 'hi', 16);
  assert.deepEqual(b.messages, [{ role: 'user', content: 'hi' }]);
  assert.equal(b.llamay_session, 'ctx_3');
  assert.equal(b.stream, true);
  assert.deepEqual(b.stream_options, { include_usage: true });
});

test('chunks and turn figures', () => {
  assert.equal(readChunk({ choices: [{ delta: { content: 'ab' } }] }).content, 'ab');
  assert.equal(readChunk({ choices: [{ delta: {}, finish_reason: 'length' }] }).finish, 'length');
  assert.equal(readChunk({ error: { message: 'boom' } }).error, 'boom');
  const usage = { prompt_tokens: 120, completion_tokens: 11, prompt_tokens_details: { cached_tokens: 100 } };
  assert.equal(readChunk({ choices: [], usage }).usage, usage);
  const st = turnStats(usage, 0, 50, 1100);
  assert.deepEqual(st, { prompt: 120, reused: 100, computed: 20, completion: 11, ms: 1100, tokPerS: 10, ttftMs: 50 });
  assert.deepEqual(turnStats(null, 0, null, 10), { prompt: null, reused: null, computed: null, completion: null, ms: 10, tokPerS: null, ttftMs: null });
});

test('a fork starts with its parent transcript, then each branch goes its own way', () => {
  const t = createTranscripts();
  t.append('ctx_1', { user: 'a', answer: 'b' });
  t.fork('ctx_1', ['ctx_2', 'ctx_3']);
  t.append('ctx_2', { user: 'c' });
  assert.equal(t.get('ctx_2').length, 2);
  assert.equal(t.get('ctx_3').length, 1);
  assert.equal(t.get('ctx_1').length, 1);
  t.get('ctx_3')[0].answer = 'changed';
  assert.equal(t.get('ctx_1')[0].answer, 'b', 'a branch has its own copy');
  t.drop('ctx_3');
  assert.deepEqual(t.get('ctx_3'), []);
});
