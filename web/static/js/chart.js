// Canvas charts drawn by hand: a time-series line chart and a per-CPU heatmap.
//
// Neither keeps its own copy of the data: both draw from a shared `Timeline` (times plus one
// array per series) so one history poll feeds every chart. Drawing happens at most once per
// animation frame, and only for charts on screen. Values that are null (the agent did not
// know them) leave gaps; they are never drawn as zero.
//
// Dragging across any chart picks a time range (pointer events, so a finger too): the band is
// drawn on every chart of the timeline, and the timeline's `onPick` hears the range (or null
// for a click, which goes back to live). The arithmetic is pick.js's.

import { byUnit, clock, DASH, percent } from "./format.js";
import { bandOn, rangeBetween } from "./pick.js";

export const PALETTE = ["#3b82f6", "#ef4444", "#10b981", "#f59e0b", "#8b5cf6", "#ec4899", "#14b8a6", "#64748b"];

/** The shared store of history: `times[i]` (unix ms) and `values.get(name)[i]`. */
export class Timeline {
  constructor() {
    this.times = [];
    this.values = new Map();
    this.windowMs = 5 * 60 * 1000;
    // The range picked by a drag ({from, to}, unix ms), drawn as a band on every chart; null
    // in the live view.
    this.pick = null;
    // Where the time axis ends while a range is picked or a drag is under way (so the charts
    // hold still under the pointer and the band stays over what was dragged across); null
    // when the axis follows the newest point.
    this.held = null;
    // Told the range a drag picked, or null when a click (no drag) asks for the live view.
    this.onPick = null;
    // The charts drawn from this timeline: a band dragged on one is drawn on all of them.
    this.charts = new Set();
  }

  /** The end of the time axis: the held end, else the newest point. */
  get end() {
    return this.held ?? this.last ?? Date.now();
  }

  clear() {
    this.times = [];
    this.values = new Map();
  }

  get last() {
    return this.times.length ? this.times[this.times.length - 1] : null;
  }

  /** Appends a /api/v1/history answer, skipping points we already hold, and trims to the window. */
  append(answer) {
    const last = this.last ?? -Infinity;
    let start = 0;
    while (start < answer.times_unix_ms.length && answer.times_unix_ms[start] <= last) start++;
    if (start === answer.times_unix_ms.length) return 0;
    const before = this.times.length;
    for (let i = start; i < answer.times_unix_ms.length; i++) this.times.push(answer.times_unix_ms[i]);
    for (const s of answer.series) {
      let arr = this.values.get(s.name);
      if (!arr) {
        // A series that appears late is unknown for the points before it.
        arr = new Array(before).fill(null);
        this.values.set(s.name, arr);
      }
      for (let i = start; i < s.values.length; i++) arr.push(s.values[i]);
    }
    // Series we hold but the answer lacked: unknown for the new points.
    for (const arr of this.values.values()) while (arr.length < this.times.length) arr.push(null);
    this.trim();
    return this.times.length - before;
  }

  trim() {
    const edge = (this.held ?? this.last ?? 0) - this.windowMs;
    let cut = 0;
    while (cut < this.times.length && this.times[cut] < edge) cut++;
    if (cut > 0) {
      this.times.splice(0, cut);
      for (const arr of this.values.values()) arr.splice(0, cut);
    }
  }

  series(name) {
    return this.values.get(name) ?? null;
  }
}

/** Pixels kept clear between a label and the canvas's edge. */
const EDGE = 2;

/** 1, 2 or 5 times a power of ten, at least `raw`. */
function niceStep(raw) {
  if (!(raw > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

/** Tick step for an axis from 0 (or min) to max; byte axes step in powers of 1024 units. */
export function tickStep(min, max, unit, count = 4) {
  const range = max - min;
  if (unit === "bytes" || unit === "bytes/s") {
    let scale = 1;
    while (range / scale >= 1024) scale *= 1024;
    return niceStep(range / scale / count) * scale;
  }
  return niceStep(range / count);
}

function cssVar(el, name, fallback) {
  const v = getComputedStyle(el).getPropertyValue(name).trim();
  return v || fallback;
}

/** Redraws queued charts once per animation frame. */
const queued = new Set();
let frameRequested = false;
function schedule(chart) {
  queued.add(chart);
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame(() => {
    frameRequested = false;
    const charts = [...queued];
    queued.clear();
    for (const c of charts) c.draw();
  });
}

/** The drag under way, if any: which pointer, where it went down, the chart's plot then, and
 * what to go back to if it is cancelled. One at a time, page-wide. */
let dragging = null;

function redrawTimeline(timeline) {
  for (const c of timeline.charts) schedule(c);
}

/** Ends a drag under way (Esc, a lost pointer) and puts back the pick there was before it;
 * says whether there was one. */
export function cancelDrag() {
  if (!dragging) return false;
  const { timeline, before } = dragging;
  dragging = null;
  timeline.pick = before.pick;
  timeline.held = before.held;
  redrawTimeline(timeline);
  return true;
}

/** Canvas sized to its box in device pixels; redraws on resize; skips drawing off screen.
 * A chart with a time axis sets `plot` ({left, width, t0, t1}) when it draws, and a drag
 * across that plot picks a range of its timeline. */
class CanvasChart {
  constructor(canvas, timeline = null) {
    this.canvas = canvas;
    this.ctx = canvas.getContext("2d");
    this.visible = true;
    this.timeline = timeline;
    this.plot = null;
    if (timeline) {
      timeline.charts.add(this);
      this.listenForDrags();
    }
    new ResizeObserver(() => schedule(this)).observe(canvas);
    new IntersectionObserver((entries) => {
      this.visible = entries[entries.length - 1].isIntersecting;
      if (this.visible) schedule(this);
    }).observe(canvas);
  }

  invalidate() {
    schedule(this);
  }

  /** Pointer down, move, up: a drag of MIN_DRAG_PX or more picks the range under it (the band
   * follows the pointer meanwhile); less is a click, which asks for the live view. */
  listenForDrags() {
    const canvas = this.canvas;
    const xIn = (e) => e.clientX - canvas.getBoundingClientRect().left;
    canvas.addEventListener("pointerdown", (e) => {
      if (e.button !== 0 || !this.plot || dragging) return;
      const timeline = this.timeline;
      dragging = { timeline, id: e.pointerId, x0: xIn(e), plot: { ...this.plot }, before: { pick: timeline.pick, held: timeline.held } };
      // Hold the axis where it is now, so the times under the pointer stay put.
      timeline.held = this.plot.t1;
      canvas.setPointerCapture(e.pointerId);
      e.preventDefault();
    });
    canvas.addEventListener("pointermove", (e) => {
      if (!dragging || dragging.id !== e.pointerId) return;
      const range = rangeBetween(dragging.x0, xIn(e), dragging.plot);
      dragging.timeline.pick = range ?? dragging.before.pick;
      redrawTimeline(dragging.timeline);
    });
    canvas.addEventListener("pointerup", (e) => {
      if (!dragging || dragging.id !== e.pointerId) return;
      const { timeline, x0, plot } = dragging;
      dragging = null;
      const range = rangeBetween(x0, xIn(e), plot);
      timeline.pick = range;
      if (!range) timeline.held = null;
      redrawTimeline(timeline);
      timeline.onPick?.(range);
    });
    canvas.addEventListener("pointercancel", (e) => {
      if (dragging && dragging.id === e.pointerId) cancelDrag();
    });
  }

  /** The picked range's band over the plot: a translucent fill with an edge each side. */
  drawBand(top, height) {
    const range = this.timeline?.pick;
    const band = range && this.plot ? bandOn(range, this.plot) : null;
    if (!band) return;
    const ctx = this.ctx;
    ctx.save();
    ctx.fillStyle = cssVar(this.canvas, "--accent", "#2563eb");
    ctx.globalAlpha = 0.16;
    ctx.fillRect(band.x, top, band.w, height);
    ctx.globalAlpha = 0.9;
    ctx.fillRect(band.x, top, 1, height);
    ctx.fillRect(band.x + band.w - 1, top, 1, height);
    ctx.restore();
  }

  /** Matches the backing store to the CSS size; returns [width, height] in CSS pixels. */
  fit() {
    const dpr = window.devicePixelRatio || 1;
    const w = this.canvas.clientWidth;
    const h = this.canvas.clientHeight;
    const bw = Math.max(1, Math.round(w * dpr));
    const bh = Math.max(1, Math.round(h * dpr));
    if (this.canvas.width !== bw || this.canvas.height !== bh) {
      this.canvas.width = bw;
      this.canvas.height = bh;
    }
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return [w, h];
  }
}

/**
 * A line chart of some Timeline series.
 *
 * options: unit ("%", "bytes", "bytes/s", "cpus", ""), series [{name, label, color, dash,
 * width}], yMax (a fixed top, e.g. 100 for percent), legend (an element to fill with one
 * entry per series showing its latest or hovered value).
 */
export class LineChart extends CanvasChart {
  constructor(canvas, timeline, options) {
    super(canvas, timeline);
    this.unit = options.unit ?? "";
    this.yMax = options.yMax ?? null;
    this.legend = options.legend ?? null;
    this.font = "11px system-ui, sans-serif";
    this.labels = []; // The texts of the last draw (see draw).
    this.hoverIndex = null;
    this.setSeries(options.series ?? []);
    canvas.addEventListener("mousemove", (e) => this.hover(e));
    canvas.addEventListener("mouseleave", () => {
      this.hoverIndex = null;
      this.invalidate();
    });
  }

  /** Replaces the plotted series (the per-device lists change when devices come and go). */
  setSeries(series) {
    this.series = series.map((s, i) => ({ color: PALETTE[i % PALETTE.length], width: 1.5, ...s }));
    if (this.legend) {
      this.legend.replaceChildren();
      this.legendValues = this.series.map((s) => {
        const item = document.createElement("span");
        item.className = "legend-item";
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = s.color;
        const label = document.createElement("span");
        label.textContent = s.label;
        const value = document.createElement("span");
        value.className = "legend-value";
        item.append(swatch, label, value);
        this.legend.append(item);
        return value;
      });
    }
    this.invalidate();
  }

  hover(e) {
    const t = this.timeline.times;
    if (!t.length || !this.plot) return;
    const rect = this.canvas.getBoundingClientRect();
    const x = e.clientX - rect.left;
    const { left, width, t0, t1 } = this.plot;
    const at = t0 + ((x - left) / width) * (t1 - t0);
    // Binary search for the nearest time.
    let lo = 0;
    let hi = t.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (t[mid] < at) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && at - t[lo - 1] < t[lo] - at) lo--;
    this.hoverIndex = lo;
    this.invalidate();
  }

  draw() {
    if (!this.visible) return;
    const [w, h] = this.fit();
    const ctx = this.ctx;
    const text = cssVar(this.canvas, "--chart-text", "#666");
    const grid = cssVar(this.canvas, "--chart-grid", "#ddd");
    ctx.clearRect(0, 0, w, h);
    ctx.font = this.font;
    // Every text drawn, with where and how it was anchored: the hook the browser tests read to
    // check that each label's box lies inside the canvas (they measure the text themselves).
    const labels = [];
    this.labels = labels;
    const label = (axis, text, x, y) => {
      ctx.fillText(text, x, y);
      labels.push({ axis, text, x, y, align: ctx.textAlign, baseline: ctx.textBaseline });
    };

    const times = this.timeline.times;
    const columns = this.series.map((s) => this.timeline.series(s.name));
    let points = 0;
    let max = this.yMax ?? 0;
    for (const col of columns) {
      if (!col) continue;
      for (const v of col) {
        if (v === null) continue;
        points++;
        if (this.yMax === null && v > max) max = v;
      }
    }
    this.canvas.dataset.points = String(points);
    if (max <= 0) max = this.unit === "%" ? 100 : 1;
    const step = tickStep(0, max, this.unit);
    const top = this.yMax ?? Math.ceil(max / step) * step;

    // Leave room for the widest y label. A percent step finer than the rule's one decimal
    // (0.05 % on the agent's own CPU) gets the decimals it needs, or ticks would repeat.
    const digits = this.unit === "%" && step < 0.1 ? Math.ceil(-Math.log10(step) - 1e-9) : null;
    let labelWidth = 0;
    const ticks = [];
    for (let v = 0; v <= top + step / 2; v += step) {
      const text = digits === null ? byUnit(this.unit, v) : percent(v, digits);
      labelWidth = Math.max(labelWidth, ctx.measureText(text).width);
      ticks.push([v, text]);
    }
    const left = Math.ceil(labelWidth) + 8;
    const right = w - 6;
    const plotTop = 6;
    const bottom = h - 18;
    const width = Math.max(1, right - left);
    const height = Math.max(1, bottom - plotTop);
    const t1 = this.timeline.end;
    const t0 = t1 - this.timeline.windowMs;
    this.plot = { left, width, t0, t1 };
    const xOf = (t) => left + ((t - t0) / (t1 - t0)) * width;
    const yOf = (v) => bottom - (Math.min(v, top) / top) * height;

    ctx.strokeStyle = grid;
    ctx.fillStyle = text;
    ctx.lineWidth = 1;
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (const [v, text] of ticks) {
      const y = Math.round(yOf(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(left, y);
      ctx.lineTo(right, y);
      ctx.stroke();
      label("y", text, left - 4, y);
    }
    // Time labels every minute-ish: pick a step giving about one label per 90 px.
    const spanSec = (t1 - t0) / 1000;
    // Up to a day (the longest range, read partly from the agent's store): up to 6-hour steps.
    const labelStepSec = [5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600].find((s) => (width / spanSec) * s >= 90) ?? 21600;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const firstLabel = Math.ceil(t0 / (labelStepSec * 1000)) * labelStepSec * 1000;
    let lastRight = -Infinity;
    for (let t = firstLabel; t <= t1; t += labelStepSec * 1000) {
      const x = Math.round(xOf(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, plotTop);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      // A label centred on a line near the edge would be cut off ("08:00:(" at the right):
      // it moves inward until it fits, still over its line (half a label at most), and one
      // that would then touch its neighbour is left out rather than drawn over it.
      const text = clock(t);
      const half = ctx.measureText(text).width / 2;
      const cx = Math.min(Math.max(x, half + EDGE), w - half - EDGE);
      if (cx - half < lastRight + 4) continue;
      label("x", text, cx, bottom + 4);
      lastRight = cx + half;
    }

    ctx.save();
    ctx.beginPath();
    ctx.rect(left, plotTop - 2, width, height + 4);
    ctx.clip();
    ctx.lineJoin = "round";
    this.series.forEach((s, si) => {
      const col = columns[si];
      if (!col) return;
      ctx.strokeStyle = s.color;
      ctx.lineWidth = s.width;
      ctx.setLineDash(s.dash ?? []);
      ctx.beginPath();
      let pen = false;
      let lone = null;
      for (let i = 0; i < times.length; i++) {
        const v = col[i];
        if (v === null || v === undefined) {
          pen = false;
          continue;
        }
        const x = xOf(times[i]);
        const y = yOf(v);
        if (pen) {
          ctx.lineTo(x, y);
          lone = null;
        } else {
          ctx.moveTo(x, y);
          lone = [x, y];
        }
        pen = true;
      }
      ctx.stroke();
      // A single point (the first sample) has no segment: mark it so it shows.
      if (lone) {
        ctx.fillStyle = s.color;
        ctx.fillRect(lone[0] - 1.5, lone[1] - 1.5, 3, 3);
      }
    });
    ctx.setLineDash([]);
    ctx.restore();
    this.drawBand(plotTop, height);

    const idx = this.hoverIndex !== null && this.hoverIndex < times.length ? this.hoverIndex : times.length - 1;
    if (this.hoverIndex !== null && idx >= 0) {
      const x = Math.round(xOf(times[idx])) + 0.5;
      ctx.strokeStyle = text;
      ctx.beginPath();
      ctx.moveTo(x, plotTop);
      ctx.lineTo(x, bottom);
      ctx.stroke();
      ctx.textAlign = x > left + width / 2 ? "right" : "left";
      ctx.textBaseline = "top";
      label("hover", clock(times[idx]), x + (ctx.textAlign === "left" ? 4 : -4), plotTop);
    }
    if (this.legendValues) {
      this.series.forEach((s, si) => {
        const col = columns[si];
        const v = col && idx >= 0 ? col[idx] : null;
        this.legendValues[si].textContent = v === null || v === undefined ? DASH : byUnit(this.unit, v);
      });
    }
  }
}

/** Busy percent per CPU over time: one row per CPU, one column per sample. */
export class Heatmap extends CanvasChart {
  constructor(canvas, timeline) {
    super(canvas, timeline);
    this.names = [];
  }

  setRows(names) {
    this.names = names;
    this.invalidate();
  }

  draw() {
    if (!this.visible) return;
    const [w, h] = this.fit();
    const ctx = this.ctx;
    ctx.clearRect(0, 0, w, h);
    const text = cssVar(this.canvas, "--chart-text", "#666");
    const empty = cssVar(this.canvas, "--chart-grid", "#eee");
    const times = this.timeline.times;
    const n = this.names.length;
    let points = 0;
    if (!n) {
      this.canvas.dataset.points = "0";
      return;
    }
    const left = n > 32 ? 8 : 40;
    const bottom = h - 2;
    const rowH = Math.max(1, (bottom - 2) / n);
    const width = w - left - 4;
    const t1 = this.timeline.end;
    const t0 = t1 - this.timeline.windowMs;
    this.plot = { left, width, t0, t1 };
    const xOf = (t) => left + ((t - t0) / (t1 - t0)) * width;
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    ctx.fillStyle = empty;
    ctx.fillRect(left, 2, width, rowH * n);
    for (let r = 0; r < n; r++) {
      const col = this.timeline.series(this.names[r]);
      const y = 2 + r * rowH;
      if (rowH >= 10) {
        ctx.fillStyle = text;
        ctx.fillText(this.names[r].replace(/^host\.(cpu\d+)\..*$/, "$1"), left - 4, y + rowH / 2);
      }
      if (!col) continue;
      for (let i = 0; i < times.length; i++) {
        const v = col[i];
        if (v === null || v === undefined) continue;
        points++;
        const x0 = xOf(times[i - 1] ?? times[i] - 1000);
        // Points after a held end (a pick) lie right of the plot: not drawn.
        const x1 = Math.min(xOf(times[i]), left + width);
        if (x1 <= x0) continue;
        ctx.fillStyle = heat(v);
        // Overlap by half a pixel so neighbouring cells leave no hairline gaps.
        ctx.fillRect(Math.max(left, x0), y, Math.max(1, x1 - x0 + 0.5), Math.max(1, rowH - (rowH >= 6 ? 1 : 0)));
      }
    }
    this.drawBand(2, rowH * n);
    this.canvas.dataset.points = String(points);
  }
}

/** 0 % → pale blue, 50 % → amber, 100 % → red. */
export function heat(percent) {
  const p = Math.max(0, Math.min(100, percent)) / 100;
  const hue = 210 - 210 * p;
  const light = 88 - 40 * p;
  return `hsl(${hue.toFixed(0)} 80% ${light.toFixed(0)}%)`;
}
