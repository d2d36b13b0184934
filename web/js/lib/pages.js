// The page-sharing strip of one context (GET /v1/contexts/{id}/pages): one cell per KV page per layer
// group, coloured by refcount, the copy-on-write divergence point marked, and the recurrent state with its
// checkpoints. Pure: no DOM, runs under node.

// Refcount buckets, lightest to darkest: held once, by 2, 3-4, 5-8, 9 or more.
export function refClass(refs) {
  if (refs <= 1) return 'r1';
  if (refs === 2) return 'r2';
  if (refs <= 4) return 'r3';
  if (refs <= 8) return 'r4';
  return 'r5';
}

export const REF_LEGEND = [
  ['r1', 'this context only'], ['r2', 'shared by 2'], ['r3', '3-4'], ['r4', '5-8'], ['r5', '9+'],
];

// "also held by ctx_1, ctx_3 and the prefix tree" / "held by this context only".
export function holdersText(holders) {
  const names = (holders ?? []).map((h) => (h === 'prefix tree' ? 'the prefix tree' : h));
  if (names.length === 0) return 'held by this context only';
  if (names.length === 1) return `also held by ${names[0]}`;
  return `also held by ${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

// At most this many cells are drawn per group; the rest is summed up in one line (a 100k-token context
// has 1,500 pages per group, more than a strip can show).
export const MAX_CELLS = 600;

// The strip's model: { id, tokens, groups: [{ label, cells, divergence, hidden, released }], recurrent }.
// A cell: { index, refs, cls, holders, title, released, diverged }. pages[i] is page first_page + i; the
// first_page pages before it were released by a sliding window and are drawn as empty cells.
export function stripModel(resp, pageTokens) {
  const groups = (resp.groups ?? []).map((g, gi) => {
    const first = g.first_page ?? 0;
    const cells = [];
    const total = first + (g.pages ?? []).length;
    const shown = Math.min(total, MAX_CELLS);
    const div = g.divergence ?? null;
    for (let index = 0; index < shown; index++) {
      const diverged = div !== null && index >= div;
      const span = pageTokens ? `tokens ${index * pageTokens}-${(index + 1) * pageTokens - 1}` : '';
      if (index < first) {
        cells.push({ index, refs: 0, cls: 'released', holders: [], released: true, diverged,
          title: `page ${index} ${span}: released (outside the window)` });
        continue;
      }
      const p = g.pages[index - first];
      cells.push({ index, refs: p.refs, cls: refClass(p.refs), holders: p.holders ?? [], released: false, diverged,
        title: `page ${index} ${span}: ${p.refs} ref${p.refs === 1 ? '' : 's'}, ${holdersText(p.holders)}` });
    }
    return { label: groupLabel(g, gi), kind: g.kind, window: g.window ?? 0, cells, divergence: div,
      hidden: total - shown, released: first, total };
  });
  return { id: resp.id, tokens: resp.tokens, groups, recurrent: recurrentModel(resp.recurrent, resp.tokens) };
}

function groupLabel(g, i) {
  const kind = g.window ? `window ${g.window}` : g.kind === 'attention' ? 'full attention' : g.kind;
  return `group ${i}: ${kind}`;
}

// A recurrent state is one fixed-size state per context, not pages: drawn as a line over the token
// positions with a mark where each checkpoint was taken and the live state at its position.
// Positions are fractions of the line's length.
export function recurrentModel(rec, tokens) {
  if (!rec) return null;
  const end = Math.max(tokens ?? 0, rec.state_position ?? 0, ...(rec.checkpoints ?? []), 1);
  return {
    statePosition: rec.state_position,
    stateAt: (rec.state_position ?? 0) / end,
    checkpoints: (rec.checkpoints ?? []).map((p) => ({ position: p, at: p / end })),
    end,
  };
}

// Pages the selected context shares and owns, counted over every group.
export function stripCounts(model) {
  let shared = 0;
  let owned = 0;
  let released = 0;
  for (const g of model.groups) {
    for (const c of g.cells) {
      if (c.released) released++;
      else if (c.refs > 1) shared++;
      else owned++;
    }
  }
  return { shared, owned, released };
}
