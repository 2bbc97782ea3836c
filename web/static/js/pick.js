// Picking a time range by dragging across a chart: the arithmetic alone, no DOM, no clock.
//
// A chart's plot is `{left, width, t0, t1}`: the plot area starts `left` CSS pixels into the
// canvas, is `width` pixels wide, and shows the times t0..t1 (unix ms) from left to right.
// chart.js turns pointer positions into a range with these; main.js asks the agent for that
// range's top processes. The browser tests and web/test/pick.test.mjs hold them to it.

import { clock, duration } from "./format.js";

/** A press that moves less than this many pixels before it is let go is a click, not a drag. */
export const MIN_DRAG_PX = 4;

/** The time under `x` (CSS pixels from the canvas's left edge), clamped to the plot's span:
 * a drag that runs past either end of the plot stops at that end. */
export function timeAt(x, plot) {
  const share = plot.width > 0 ? (x - plot.left) / plot.width : 0;
  return plot.t0 + Math.min(1, Math.max(0, share)) * (plot.t1 - plot.t0);
}

/** Where time `t` lies on the plot, in CSS pixels from the canvas's left edge (not clamped). */
export function xAt(t, plot) {
  return plot.left + ((t - plot.t0) / (plot.t1 - plot.t0)) * plot.width;
}

/**
 * The range a drag from `x0` to `x1` picks: `{from, to}` in whole unix milliseconds, earlier
 * first whichever way the pointer went, both ends inside the plot's span. `null` when the
 * pointer moved less than `minPx` (a click) or both ends fell on the same edge of the plot.
 */
export function rangeBetween(x0, x1, plot, minPx = MIN_DRAG_PX) {
  if (!(Math.abs(x1 - x0) >= minPx)) return null;
  const a = timeAt(x0, plot);
  const b = timeAt(x1, plot);
  const from = Math.round(Math.min(a, b));
  const to = Math.round(Math.max(a, b));
  return to > from ? { from, to } : null;
}

/** The band a range covers on the plot, `{x, w}` in CSS pixels, cut to the plot area; `null`
 * when none of it is on the plot. */
export function bandOn(range, plot) {
  const a = Math.max(plot.left, xAt(range.from, plot));
  const b = Math.min(plot.left + plot.width, xAt(range.to, plot));
  return b > a ? { x: a, w: b - a } : null;
}

/** "14:03:05 – 14:03:12 (7.0 s)": a range in words, local time as the charts' axes write it;
 * a range across midnight gives both ends their dates. */
export function describeRange(range) {
  const day = (ms) => {
    const d = new Date(ms);
    return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")} `;
  };
  const dates = day(range.from) !== day(range.to);
  const at = (ms) => (dates ? day(ms) : "") + clock(ms);
  return `${at(range.from)} \u2013 ${at(range.to)} (${duration((range.to - range.from) / 1000)})`;
}
