// Formatting of numbers, sizes and times for the page. Pure: no DOM, runs under node.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

// 1536 -> "1.5 KiB". Binary units, as the server's --kv-memory is in MiB.
export function fmtBytes(n) {
  if (!Number.isFinite(n) || n < 0) return '-';
  let i = 0;
  while (n >= 1024 && i < UNITS.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0)} ${UNITS[i]}`;
}

// 12345 -> "12,345": counts stay exact (a reader compares them with curl's output).
export function fmtInt(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '-';
  return Math.round(n).toLocaleString('en-US');
}

// A duration in ms as the largest unit that keeps it short: "850 ms", "12 s", "5 min", "3 h", "2 d".
export function fmtDuration(ms) {
  if (!Number.isFinite(ms)) return '-';
  if (ms < 0) ms = 0;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

// "3 s ago" from an epoch time; "never" for null (a prefix node never hit).
export function fmtAgo(epochMs, nowMs) {
  if (epochMs === null || epochMs === undefined || !epochMs) return 'never';
  return `${fmtDuration(nowMs - epochMs)} ago`;
}

export function fmtRate(perSecond) {
  if (!Number.isFinite(perSecond)) return '-';
  return `${perSecond < 10 ? perSecond.toFixed(1) : Math.round(perSecond)} tok/s`;
}

export function fmtPercent(ratio) {
  if (!Number.isFinite(ratio)) return '-';
  return `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`;
}

// Control characters and newlines of a decoded token preview shown visibly, so that a preview made of
// "\n\n" is not an empty cell.
export function showText(s, max = 48) {
  let t = String(s ?? '').replace(/\n/g, '↵').replace(/\t/g, '→').replace(/[\x00-\x1f\x7f]/g, '·');
  if (t.trim() === '') t = t.replace(/ /g, '␣'); // a node of spaces alone is not an empty cell
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

// Context ids sort by their number ("ctx_2" before "ctx_10"); other ids (resp_..., pck_...) after, by name.
export function compareIds(a, b) {
  const na = /^ctx_(\d+)$/.exec(a);
  const nb = /^ctx_(\d+)$/.exec(b);
  if (na && nb) return Number(na[1]) - Number(nb[1]);
  if (na) return -1;
  if (nb) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
