// A Server-Sent Events parser (the WHATWG event-stream format), fed text as it arrives. Used for
// /v1/events when it is read with fetch() (an API key needs a header, which EventSource cannot send) and
// for streamed chat completions. Pure: no DOM, runs under node.

// Returns { push(text), end() }. onEvent gets { id, event, data } for every dispatched event; `id` is the
// last id seen on the stream (ids persist across events, as in EventSource), `event` defaults to "message".
export function createSseParser(onEvent) {
  let buffer = '';
  let lastId = '';
  let event = '';
  let data = [];
  let retry = null;

  function dispatch() {
    if (data.length > 0) onEvent({ id: lastId, event: event || 'message', data: data.join('\n'), retry });
    event = '';
    data = [];
  }

  function line(l) {
    if (l === '') return dispatch();
    if (l[0] === ':') return; // a comment: the server's keep-alive
    const colon = l.indexOf(':');
    const field = colon < 0 ? l : l.slice(0, colon);
    let value = colon < 0 ? '' : l.slice(colon + 1);
    if (value[0] === ' ') value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) lastId = value;
    else if (field === 'retry' && /^\d+$/.test(value)) retry = Number(value);
  }

  return {
    push(text) {
      buffer += text;
      // A line ends at \n, \r\n or \r. A \r at the very end may be the first half of a \r\n split across
      // two chunks, so it waits for the next chunk.
      let m;
      const re = /\r\n|\r(?!$)|\n/g;
      let start = 0;
      while ((m = re.exec(buffer)) !== null) {
        line(buffer.slice(start, m.index));
        start = m.index + m[0].length;
      }
      buffer = buffer.slice(start);
    },
    // The stream ended: an event without its blank line is dropped, as the format says.
    end() {
      if (buffer.endsWith('\r')) line(buffer.slice(0, -1));
      buffer = '';
      event = '';
      data = [];
    },
    get lastId() {
      return lastId;
    },
  };
}
