// Chat turns with a held context: the request body, reading a streamed chunk, the per-turn figures
// (reused against computed prompt tokens, tokens/s), and the transcripts the browser keeps per context
// (the server keeps tokens, not messages). Pure: no DOM, runs under node.

// One turn on a session: only the new message is sent; the context holds the conversation so far.
export function chatBody(contextId, text, maxTokens) {
  return {
    messages: [{ role: 'user', content: text }],
    llamay_session: contextId,
    stream: true,
    stream_options: { include_usage: true }, // the last chunk carries usage, with the cached tokens
    max_tokens: maxTokens,
  };
}

// What one streamed chunk (an SSE data line's JSON) adds: text, reasoning, usage, an error, the end.
export function readChunk(chunk) {
  const out = { content: '', reasoning: '', usage: null, error: null, finish: null };
  if (chunk.error) out.error = chunk.error.message ?? JSON.stringify(chunk.error);
  for (const c of chunk.choices ?? []) {
    out.content += c.delta?.content ?? '';
    out.reasoning += c.delta?.reasoning_content ?? '';
    if (c.finish_reason) out.finish = c.finish_reason;
  }
  if (chunk.usage) out.usage = chunk.usage;
  return out;
}

// The turn's figures. Times are ms (performance.now()): sent, first token, end. The speed is measured as
// the browser sees it, over the whole turn: a server writes tokens in bursts (the first write may carry
// many), so the time between the first and the last token that arrived says little.
export function turnStats(usage, tSent, tFirst, tEnd) {
  const prompt = usage?.prompt_tokens ?? null;
  const reused = usage?.prompt_tokens_details?.cached_tokens ?? usage?.llamay_cached_prompt_tokens ?? null;
  const completion = usage?.completion_tokens ?? null;
  const ms = tEnd - tSent;
  return {
    prompt,
    reused,
    computed: prompt !== null && reused !== null ? prompt - reused : null,
    completion,
    ms,
    tokPerS: completion > 0 && ms > 0 ? (completion * 1000) / ms : null,
    ttftMs: tFirst !== null ? tFirst - tSent : null,
  };
}

// Transcripts by context id. A fork's branches start with their parent's turns, as their KV does.
export function createTranscripts() {
  const byId = new Map();
  return {
    get: (id) => byId.get(id) ?? [],
    append(id, turn) {
      if (!byId.has(id)) byId.set(id, []);
      byId.get(id).push(turn);
      return turn;
    },
    fork(parent, children) {
      const turns = byId.get(parent) ?? [];
      for (const c of children) if (!byId.has(c)) byId.set(c, turns.map((t) => ({ ...t })));
    },
    drop: (id) => byId.delete(id),
  };
}
