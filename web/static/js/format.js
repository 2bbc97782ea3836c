// Number formatting for the dashboard: pure functions, no DOM.
// Every formatter turns null/undefined/NaN into an em dash, because the API reports
// unknown values as null (never 0) and the page must not invent a zero.

export const DASH = "\u2014";

function known(v) {
  return v !== null && v !== undefined && Number.isFinite(v);
}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** 1536 → "1.5 KiB". Three significant digits at most. */
export function bytes(v) {
  if (!known(v)) return DASH;
  let i = 0;
  let x = Math.abs(v);
  while (x >= 1024 && i < BYTE_UNITS.length - 1) {
    x /= 1024;
    i++;
  }
  const sign = v < 0 ? "-" : "";
  const digits = i === 0 || x >= 100 ? 0 : x >= 10 ? 1 : 2;
  return `${sign}${x.toFixed(digits)} ${BYTE_UNITS[i]}`;
}

export function bytesPerSec(v) {
  return known(v) ? `${bytes(v)}/s` : DASH;
}

/** One decimal below 10, none from 10 up: `0.3`, `9.9`, `57`, `200` (the CLI's rule,
 * proctor_vocab::units::percent), so a small share keeps the digit that tells 0.4 from 4. */
function percentNumber(v) {
  return Math.abs(v) < 10 ? v.toFixed(1) : v.toFixed(0);
}

/** "3.4 %", "57 %" by the CLI's rule; `digits` fixes the decimals instead, for the few
 * figures whose small values are the point (the agent's own cost, pressure stalls). */
export function percent(v, digits = null) {
  if (!known(v)) return DASH;
  return `${digits === null ? percentNumber(v) : v.toFixed(digits)} %`;
}

/** A plain number with at most `digits` decimals and no trailing zeros. */
export function num(v, digits = 2) {
  if (!known(v)) return DASH;
  return String(Number(v.toFixed(digits)));
}

/** Seconds → "850 µs", "12.3 ms", "4.2 s", "3 min 20 s", "2 h 5 min". */
export function duration(secs) {
  if (!known(secs)) return DASH;
  if (secs === 0) return "0 s";
  if (secs < 1e-3) return `${(secs * 1e6).toFixed(0)} µs`;
  if (secs < 1) return `${(secs * 1e3).toFixed(secs < 0.01 ? 2 : 1)} ms`;
  if (secs < 60) return `${secs.toFixed(1)} s`;
  if (secs < 3600) return `${Math.floor(secs / 60)} min ${Math.floor(secs % 60)} s`;
  if (secs < 86400) return `${Math.floor(secs / 3600)} h ${Math.floor((secs % 3600) / 60)} min`;
  return `${Math.floor(secs / 86400)} d ${Math.floor((secs % 86400) / 3600)} h`;
}

/** Integers with thin grouping: 12345 → "12 345". */
export function count(v) {
  if (!known(v)) return DASH;
  return Math.round(v).toString().replace(/\B(?=(\d{3})+(?!\d))/g, "\u2009");
}

/** "10.0 GiB" → "10 GiB": axis ticks are round numbers. */
function trimZeros(s) {
  return s.replace(/\.0+ /, " ");
}

/**
 * Formats a value by its unit name: the vocabulary's units (`count`, `bytes`, `bytes/s`, `%`,
 * `s`, `cpus`, `W`, `/s`, `number`) and the charts' axis ticks. In a table (`{table: true}`) a
 * percent has no unit (the column says it) and counts are grouped; on an axis round byte
 * figures drop their zeros. Percentages follow the CLI's rule everywhere (see `percent`).
 */
export function byUnit(unit, v, { table = false } = {}) {
  if (table) {
    switch (unit) {
      case "bytes":
        return bytes(v);
      case "bytes/s":
        return bytesPerSec(v);
      case "%":
        return known(v) ? percentNumber(v) : DASH;
      case "count":
        return count(v);
      case "s":
        return duration(v);
      default:
        break;
    }
  }
  switch (unit) {
    case "bytes":
      return trimZeros(bytes(v));
    case "bytes/s":
      return trimZeros(bytesPerSec(v));
    case "%":
      return percent(v);
    case "cpus":
      return known(v) ? `${num(v, 2)} CPU` : DASH;
    case "W":
      return known(v) ? `${num(v, 2)} W` : DASH;
    case "s":
      return duration(v);
    case "/s":
      return known(v) ? `${num(v, 2)}/s` : DASH;
    default:
      return num(v, 2);
  }
}

/** "14:03:05" in local time. */
export function clock(ms) {
  const d = new Date(ms);
  const two = (n) => String(n).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}
