// A small element builder. Text goes in as text nodes, never as HTML, so a decoded token preview or a
// model's output cannot inject markup; no `style` attribute is ever set (the CSP forbids inline styles:
// sizes are set through element.style, which it allows).

const SVG_NS = 'http://www.w3.org/2000/svg';

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'data') for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = dv;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const h = (tag, attrs, ...children) => build(document.createElement(tag), attrs, children);
export const s = (tag, attrs, ...children) => build(document.createElementNS(SVG_NS, tag), attrs, children);

// Replaces an element's children.
export function fill(el, ...children) {
  el.replaceChildren();
  return build(el, null, children);
}

export const $ = (sel) => document.querySelector(sel);

// True when any of deps differs from what it was at the last call with this key: a panel redraws only when
// what it shows changed, so that the elements under the pointer (a hovered cell, a selection of text, a
// click between its mousedown and mouseup) are not replaced every second.
const memo = new Map();
export function changed(key, ...deps) {
  const old = memo.get(key);
  if (old && old.length === deps.length && old.every((d, i) => d === deps[i])) return false;
  memo.set(key, deps);
  return true;
}
