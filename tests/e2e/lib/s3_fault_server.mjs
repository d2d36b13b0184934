// An S3 server for the store tests (src/store/s3_store_test.cc): npm s3rver on loopback, behind a small
// HTTP proxy that checks every request the way AWS would and injects faults on command.
//
// The proxy, for each request it receives:
//   * verifies the SigV4 signature independently (with the AWS SDK's own signer, @smithy/signature-v4),
//     the x-amz-content-sha256 payload hash and Content-MD5; a mismatch is answered like S3 does
//     (403 SignatureDoesNotMatch, 400 XAmzContentSHA256Mismatch, 400 BadDigest). s3rver checks none of it.
//   * then applies the current fault, if any, and otherwise forwards the request to s3rver.
// Faults: none | drop (close the connection without an answer) | delay (wait delay_ms, then forward) |
//   status (answer `status` with S3 error `code`) | truncate (forward, then send the headers with the
//   full Content-Length but only `keep` bytes of the body and close) | corrupt (flip one byte of the
//   request body that reaches s3rver, or of the response body).
//   `count` limits how many requests the fault hits (-1: all); `methods` limits it to some methods.
//
// Virtual-hosted requests work through http://s3.localhost:<proxy port> (bucket.s3.localhost).
// Usage: node s3_fault_server.mjs --access-key AK --secret-key SK [--session-token T] [--bucket NAME]...
//   [--data-dir DIR] [--port PROXY_PORT]   (a restart on the same DIR and port serves the same objects)
// Prints "READY s3=<port> proxy=<port>" once both listen. Reads commands from stdin, one JSON per line:
//   {"cmd":"fault","mode":"status","status":500,"code":"InternalError","count":-1,"methods":["PUT"]}
//   {"cmd":"reset"}   clears the fault and the counters          -> "OK"
//   {"cmd":"stats"}   -> "STATS {"requests":N,"faulted":N,"signed":N,"unsigned":N,"sigfail":N,...}"
// Exits, removing its data folder (unless --data-dir), when stdin closes or on SIGTERM/SIGINT.
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import S3rver from 's3rver';
import { SignatureV4 } from '@smithy/signature-v4';

// s3rver encrypts its ListObjectsV2 continuation tokens with DES, which Node's OpenSSL 3 has only in its
// legacy provider: without it, every listing that needs a second page fails with HTTP 500. Stand in for
// DES with AES-128-CBC (key and IV repeated to 16 bytes); the tokens only need to round-trip.
try {
  crypto.createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8));
} catch {
  const widen = (b) => Buffer.concat([Buffer.from(b), Buffer.from(b)]);
  for (const name of ['createCipheriv', 'createDecipheriv']) {
    const original = crypto[name];
    crypto[name] = (algorithm, key, iv, ...rest) =>
      algorithm === 'des' ? original('aes-128-cbc', widen(key), widen(iv), ...rest) : original(algorithm, key, iv, ...rest);
  }
}

const args = { buckets: [] };
for (let i = 2; i < process.argv.length; i += 2) {
  const [k, v] = [process.argv[i], process.argv[i + 1]];
  if (k === '--access-key') args.accessKey = v;
  else if (k === '--secret-key') args.secretKey = v;
  else if (k === '--session-token') args.sessionToken = v;
  else if (k === '--bucket') args.buckets.push(v);
  else if (k === '--data-dir') args.dataDir = v;  // kept on exit, so that a restart finds the objects
  else if (k === '--port') args.port = Number(v);  // the proxy's port (default: any free one)
  else { console.error(`unknown argument ${k}`); process.exit(2); }
}
if (!args.accessKey || !args.secretKey) { console.error('--access-key and --secret-key are required'); process.exit(2); }

const dataDir = args.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'llamay-s3rver-'));
const s3 = new S3rver({
  // serviceEndpoint 'localhost': a request to <bucket>.s3.localhost is virtual-hosted (curl and Node
  // resolve *.localhost to loopback); one to 127.0.0.1 is path-style.
  address: '127.0.0.1', port: 0, silent: true, directory: dataDir, serviceEndpoint: 'localhost',
  configureBuckets: args.buckets.map((name) => ({ name })),
});
let cleaned = false;
function cleanup() {
  if (cleaned || args.dataDir) return;
  cleaned = true;
  try { fs.rmSync(dataDir, { recursive: true, force: true }); } catch { /* best effort */ }
}
process.on('exit', cleanup);
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => { cleanup(); process.exit(0); });

class Sha256 {
  constructor(secret) { this.h = secret ? crypto.createHmac('sha256', secret) : crypto.createHash('sha256'); }
  update(data) { this.h.update(data); }
  async digest() { return new Uint8Array(this.h.digest()); }
}

let fault = { mode: 'none' };
let stats;
function resetStats() {
  stats = { requests: 0, faulted: 0, signed: 0, unsigned: 0, sigfail: 0, last_sigfail: '', methods: {} };
}
resetStats();

function xmlError(res, status, code, message) {
  if (res.headersSent) return res.destroy();  // already answering: the client sees a cut response
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message>` +
    `<RequestId>llamay-fault-proxy</RequestId></Error>`;
  res.writeHead(status, { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

// Recomputes the request's signature with the SDK signer over exactly the headers it says it signed.
// Returns '' when it matches, else why not.
async function checkSignature(req, body) {
  const auth = req.headers.authorization;
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return `malformed Authorization header: ${auth}`;
  const [, accessKey, , region, service, signedList, signature] = m;
  if (accessKey !== args.accessKey) return `InvalidAccessKeyId:${accessKey}`;
  const amzDate = req.headers['x-amz-date'] ?? '';
  const d = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!d) return `bad x-amz-date ${amzDate}`;
  const signingDate = new Date(Date.UTC(+d[1], +d[2] - 1, +d[3], +d[4], +d[5], +d[6]));
  const signed = signedList.split(';');
  if (!signed.includes('host')) return 'host is not signed';
  if (!signed.includes('x-amz-content-sha256')) return 'x-amz-content-sha256 is not signed';
  if (args.sessionToken !== undefined &&
      (req.headers['x-amz-security-token'] !== args.sessionToken || !signed.includes('x-amz-security-token'))) {
    return 'missing or wrong x-amz-security-token';
  }
  const headers = {};
  for (const h of signed) {
    if (h === 'x-amz-date') continue;  // the signer writes it from signingDate
    if (req.headers[h] === undefined) return `signed header ${h} is absent`;
    headers[h] = req.headers[h];
  }
  const url = new URL(req.url, `http://${req.headers.host}`);
  const query = {};
  for (const [k, v] of url.searchParams) query[k] = v;
  const signer = new SignatureV4({
    credentials: { accessKeyId: args.accessKey, secretAccessKey: args.secretKey },
    region, service, sha256: Sha256, uriEscapePath: false, applyChecksum: false,
  });
  const out = await signer.sign({
    method: req.method, protocol: 'http:', hostname: url.hostname, port: url.port ? +url.port : undefined,
    path: url.pathname, query, headers, body,
  }, { signingDate, signableHeaders: new Set(signed) });
  const want = /Signature=([0-9a-f]{64})/.exec(out.headers.authorization)[1];
  const wantSigned = /SignedHeaders=([^,]+)/.exec(out.headers.authorization)[1];
  if (wantSigned !== signedList) return `signed headers differ: ${signedList} vs ${wantSigned}`;
  if (want !== signature) return `SignatureDoesNotMatch for ${req.method} ${req.url}`;
  return '';
}

function faultApplies(method) {
  if (fault.mode === 'none' || fault.count === 0) return false;
  if (fault.methods && !fault.methods.includes(method)) return false;
  if (fault.count > 0) fault.count--;
  stats.faulted++;
  return true;
}

function flipByte(buf) {
  if (buf.length === 0) return buf;
  const copy = Buffer.from(buf);
  copy[copy.length >> 1] ^= 0x5a;
  return copy;
}

async function handle(req, res, body) {
  stats.requests++;
  stats.methods[req.method] = (stats.methods[req.method] ?? 0) + 1;
  if (req.headers.authorization) {
    stats.signed++;
    const why = await checkSignature(req, body);
    if (why) {
      stats.sigfail++;
      stats.last_sigfail = why;
      if (why.startsWith('InvalidAccessKeyId')) {
        return xmlError(res, 403, 'InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.');
      }
      return xmlError(res, 403, 'SignatureDoesNotMatch',
        'The request signature we calculated does not match the signature you provided. Check your key and signing method.');
    }
    const sha = req.headers['x-amz-content-sha256'];
    if (sha !== 'UNSIGNED-PAYLOAD' && sha !== crypto.createHash('sha256').update(body).digest('hex')) {
      return xmlError(res, 400, 'XAmzContentSHA256Mismatch', "The provided 'x-amz-content-sha256' header does not match what was computed.");
    }
  } else {
    stats.unsigned++;
  }
  const md5 = req.headers['content-md5'];
  if (md5 !== undefined && md5 !== crypto.createHash('md5').update(body).digest('base64')) {
    return xmlError(res, 400, 'BadDigest', 'The Content-MD5 you specified did not match what we received.');
  }

  const faulted = faultApplies(req.method);
  if (faulted && fault.mode === 'drop') return req.socket.destroy();
  if (faulted && fault.mode === 'status') {
    return xmlError(res, fault.status ?? 500, fault.code ?? 'InternalError', 'Injected by the fault proxy.');
  }
  if (faulted && fault.mode === 'delay') await new Promise((r) => setTimeout(r, fault.delay_ms ?? 5000));
  if (res.destroyed) return;
  const upstreamBody = faulted && fault.mode === 'corrupt' && body.length > 0 ? flipByte(body) : body;

  // Checked above; s3rver would refuse any access key but its own, so it gets the request unsigned.
  // A fresh connection per request (agent: false): a kept-alive socket that s3rver closes just as it is
  // reused fails with ECONNRESET, sometimes after the response has arrived, and the proxy would then
  // answer twice.
  const headers = { ...req.headers };
  delete headers.authorization;
  delete headers.connection;
  const up = http.request({ host: '127.0.0.1', port: s3Port, method: req.method, path: req.url, headers, agent: false }, (ur) => {
    const chunks = [];
    ur.on('data', (c) => chunks.push(c));
    ur.on('end', () => {
      if (res.headersSent || res.destroyed) return;
      let out = Buffer.concat(chunks);
      const h = { ...ur.headers };
      delete h['transfer-encoding'];
      if (req.method !== 'HEAD') h['content-length'] = String(out.length);
      if (faulted && fault.mode === 'truncate' && req.method !== 'HEAD') {
        res.writeHead(ur.statusCode, h);
        res.write(out.subarray(0, Math.min(out.length, fault.keep ?? (out.length >> 1))),
          () => setTimeout(() => res.socket?.destroy(), 20));
        return;
      }
      if (faulted && fault.mode === 'corrupt' && body.length === 0) out = flipByte(out);
      res.writeHead(ur.statusCode, h);
      res.end(out);
    });
  });
  up.on('error', (e) => xmlError(res, 502, 'BadGateway', `s3rver: ${e.message}`));
  up.end(upstreamBody);
}

const proxy = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    handle(req, res, Buffer.concat(chunks)).catch((e) => {
      if (!res.headersSent) xmlError(res, 500, 'ProxyError', String(e));
    });
  });
});
proxy.keepAliveTimeout = 2000;

let s3Port;
const { port } = await s3.run();
s3Port = port;
await new Promise((r) => proxy.listen(args.port ?? 0, '127.0.0.1', r));
process.stdout.write(`READY s3=${s3Port} proxy=${proxy.address().port}\n`);

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (!line.trim()) return;
  let c;
  try { c = JSON.parse(line); } catch (e) { process.stdout.write(`ERROR ${e.message}\n`); return; }
  if (c.cmd === 'fault') {
    fault = { count: -1, ...c };
    process.stdout.write('OK\n');
  } else if (c.cmd === 'reset') {
    fault = { mode: 'none' };
    resetStats();
    process.stdout.write('OK\n');
  } else if (c.cmd === 'stats') {
    process.stdout.write(`STATS ${JSON.stringify(stats)}\n`);
  } else {
    process.stdout.write(`ERROR unknown command ${c.cmd}\n`);
  }
});
rl.on('close', async () => {
  proxy.close();
  await s3.close().catch(() => {});
  cleanup();
  process.exit(0);
});
