// An HTTP proxy on loopback between the browser and llamay, so that a test can cut the page's event
// stream the way a network or a restart would: every open /v1/events response is destroyed, and new ones
// are refused (503) for a while. Everything else passes through untouched.
import http from 'node:http';

export async function startProxy(target) {
  let upstream = new URL(target);
  const streams = new Set();
  let refuseUntil = 0;
  const server = http.createServer((req, res) => {
    const isEvents = req.url.startsWith('/v1/events');
    if (isEvents && Date.now() < refuseUntil) {
      res.writeHead(503, { 'Content-Type': 'text/plain' });
      res.end('the test cut the stream');
      return;
    }
    const up = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
      if (isEvents) {
        const pair = { res, ur };
        streams.add(pair);
        res.on('close', () => streams.delete(pair));
      }
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    // Cuts every open event stream and refuses new ones for refuseMs.
    cut(refuseMs) {
      refuseUntil = Date.now() + refuseMs;
      for (const { res, ur } of streams) {
        ur.destroy();
        res.destroy();
      }
      streams.clear();
    },
    openStreams: () => streams.size,
    // From now on, requests go to another server (the same address restarted, as the page sees it).
    retarget(url) {
      upstream = new URL(url);
    },
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(r);
    }),
  };
}
