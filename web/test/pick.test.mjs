// The arithmetic of picking a range on a chart (web/static/js/pick.js), in node alone: no
// browser, no agent. The Chromium test in dashboard.test.mjs drags across a real chart.
//
//   node --test web/test/pick.test.mjs

import { test } from "node:test";
import assert from "node:assert/strict";
import { MIN_DRAG_PX, bandOn, describeRange, rangeBetween, timeAt, xAt } from "../static/js/pick.js";

// A plot 600 px wide starting 40 px into its canvas, showing one minute: 100 ms per pixel.
const T0 = Date.UTC(2026, 10, 25, 12, 0, 0);
const PLOT = { left: 40, width: 600, t0: T0, t1: T0 + 60_000 };

test("a pixel maps to the time under it, and back", () => {
  assert.equal(timeAt(40, PLOT), T0);
  assert.equal(timeAt(640, PLOT), T0 + 60_000);
  assert.equal(timeAt(340, PLOT), T0 + 30_000);
  assert.equal(timeAt(41, PLOT), T0 + 100);
  for (const t of [T0, T0 + 12_300, T0 + 60_000]) assert.equal(timeAt(xAt(t, PLOT), PLOT), t);
});

test("a pixel off the plot is clamped to the chart's span", () => {
  assert.equal(timeAt(0, PLOT), T0, "the y labels' strip is the start");
  assert.equal(timeAt(-500, PLOT), T0);
  assert.equal(timeAt(900, PLOT), T0 + 60_000, "past the right edge is the end");
});

test("a drag picks its range, earlier end first, in whole milliseconds", () => {
  assert.deepEqual(rangeBetween(140, 240, PLOT), { from: T0 + 10_000, to: T0 + 20_000 });
  // Dragged right to left: the same range.
  assert.deepEqual(rangeBetween(240, 140, PLOT), { from: T0 + 10_000, to: T0 + 20_000 });
  const odd = rangeBetween(140.33, 240.77, PLOT);
  assert.ok(Number.isInteger(odd.from) && Number.isInteger(odd.to), JSON.stringify(odd));
  assert.deepEqual(odd, { from: T0 + 10_033, to: T0 + 20_077 });
});

test("a drag past the plot's ends stops at them", () => {
  assert.deepEqual(rangeBetween(-30, 100, PLOT), { from: T0, to: T0 + 6_000 });
  assert.deepEqual(rangeBetween(700, 540, PLOT), { from: T0 + 50_000, to: T0 + 60_000 });
  assert.deepEqual(rangeBetween(-100, 2000, PLOT), { from: T0, to: T0 + 60_000 });
  // Both ends beyond one edge: nothing of the span is picked.
  assert.equal(rangeBetween(700, 800, PLOT), null);
  assert.equal(rangeBetween(-80, 0, PLOT), null);
});

test("a press that hardly moves is a click, not a pick", () => {
  assert.equal(rangeBetween(200, 200, PLOT), null);
  assert.equal(rangeBetween(200, 200 + MIN_DRAG_PX - 0.5, PLOT), null);
  assert.equal(rangeBetween(200, 200 - MIN_DRAG_PX + 0.5, PLOT), null);
  assert.notEqual(rangeBetween(200, 200 + MIN_DRAG_PX, PLOT), null);
  assert.equal(rangeBetween(200, NaN, PLOT), null);
});

test("a picked range's band is cut to the plot, or absent when off it", () => {
  assert.deepEqual(bandOn({ from: T0 + 10_000, to: T0 + 20_000 }, PLOT), { x: 140, w: 100 });
  // The charts moved on (a longer window, a later end): the part still shown.
  assert.deepEqual(bandOn({ from: T0 - 5_000, to: T0 + 1_000 }, PLOT), { x: 40, w: 10 });
  assert.equal(bandOn({ from: T0 - 9_000, to: T0 - 1_000 }, PLOT), null);
});

test("a range in words: local clock times and its length", () => {
  const from = new Date(2026, 10, 25, 14, 3, 5).getTime();
  assert.equal(describeRange({ from, to: from + 7_000 }), "14:03:05 \u2013 14:03:12 (7.0 s)");
  assert.equal(describeRange({ from, to: from + 200_000 }), "14:03:05 \u2013 14:06:25 (3 min 20 s)");
  const late = new Date(2026, 10, 25, 23, 50, 0).getTime();
  assert.equal(describeRange({ from: late, to: late + 20 * 60_000 }), "2026-11-25 23:50:00 \u2013 2026-11-26 00:10:00 (20 min 0 s)");
});
