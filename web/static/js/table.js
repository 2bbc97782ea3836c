// The process table: client-side sort, filter and tree over the latest process list, drawn
// with a fixed pool of row elements (virtualised), so thousands of processes cost only the
// rows on screen.
//
// Names and command lines are attacker-controlled (any user can name a process
// `<img src=x onerror=…>`), so every cell is written with textContent, never as markup.

import * as fmt from "./format.js";
import { PROCESS_FIELDS } from "./vocabulary.js";

const ROW_HEIGHT = 22; // Must match .prow's height in app.css.
const OVERSCAN = 8;

const text = (v) => (v === null || v === undefined ? null : String(v));
/** `shown` marked "~" where the PSS figures are a clone's reading (`pss_estimated_from`), not
 * this process's own. */
export const approx = (p, shown) => (p.pss_estimated_from != null && shown !== fmt.DASH ? `~${shown}` : shown);
const cmdlineText = (p) => (p.cmdline === null || p.cmdline === undefined ? null : p.cmdline.join(" "));

/**
 * A column of the table from the vocabulary's field table (`/js/vocabulary.js`, made from
 * proctor-vocab's fields): its title, unit (which picks the formatter) and description come
 * from there. `key` is the sort key and cell class; `first` is the order a first click picks.
 */
function column(key, field, first, overrides = {}) {
  const f = PROCESS_FIELDS[field];
  const numeric = f.unit !== "text" && f.unit !== "text[]";
  return {
    key,
    label: f.title,
    description: f.description,
    get: (p) => p[field],
    show: (p) => (numeric ? fmt.byUnit(f.unit, p[field], { table: true }) : p[field] ?? ""),
    first,
    num: numeric,
    ...overrides,
  };
}

export const COLUMNS = [
  column("pid", "pid", "asc", { show: (p) => String(p.pid) }),
  column("user", "uid", "asc"),
  column("name", "name", "asc"),
  column("state", "state", "asc"),
  column("cpu", "cpu_percent", "desc"),
  column("rss", "rss_bytes", "desc"),
  // A clone's reading standing in for this process's own is marked "~", as `top` marks it.
  column("pss", "pss_bytes", "desc", {
    description: `${PROCESS_FIELDS.pss_bytes.description} ~ marks a clone's reading, standing in until this process is read itself (its detail says whose).`,
    show: (p) => approx(p, fmt.bytes(p.pss_bytes)),
  }),
  column("swap", "swap_bytes", "desc"),
  column("threads", "threads", "desc"),
  column("vsize", "vsize_bytes", "desc"),
  // Shown only when the agent counts per-process network (`serve --net`): see setData.
  column("netrx", "net_rx_bytes_per_sec", "desc"),
  column("nettx", "net_tx_bytes_per_sec", "desc"),
  column("cmdline", "cmdline", "asc", { get: cmdlineText, show: (p) => cmdlineText(p) ?? "" }),
];

const BY_KEY = new Map(COLUMNS.map((c) => [c.key, c]));

/**
 * Compares two processes by a column. Unknown values (null) sort last in both orders, since
 * "no reading yet" is not "smallest"; ties go by pid so the order is stable between polls.
 * Text compares by UTF-16 code units, not locale, so the order does not depend on the browser.
 */
export function compare(column, order) {
  const sign = order === "desc" ? -1 : 1;
  const get = column.get;
  return (a, b) => {
    const va = get(a);
    const vb = get(b);
    const na = va === null || va === undefined;
    const nb = vb === null || vb === undefined;
    if (na || nb) {
      if (na && nb) return a.pid - b.pid;
      return na ? 1 : -1;
    }
    if (va < vb) return -sign;
    if (va > vb) return sign;
    return a.pid - b.pid;
  };
}

/**
 * A kernel thread, decided from the fields the API gives. htop reads the PF_KTHREAD flag from
 * `stat`, which the API does not carry; what it does carry is enough: the kernel starts every
 * kernel thread as a child of kthreadd (pid 2), and a kernel thread has no user memory, so no
 * arguments (`cmdline` is `[]`). A child of kthreadd that has arguments is a program the kernel
 * started (a user-mode helper such as modprobe) and is shown; a `cmdline` of null (not read
 * yet) is not known to be empty, so that process is shown until it is read. In a pid namespace
 * kthreadd and the kernel threads are not visible, and a pid 2 there has arguments.
 */
export function isKernelThread(p) {
  return (p.pid === 2 || p.ppid === 2) && Array.isArray(p.cmdline) && p.cmdline.length === 0;
}

/** The agent's own filter semantics: a substring of the name or of the command line (its
 * arguments joined by single spaces, as htop matches it), or the exact pid. */
export function matches(p, needle) {
  if (!needle) return true;
  if (String(p.pid) === needle) return true;
  if (p.name.toLowerCase().includes(needle)) return true;
  return Array.isArray(p.cmdline) && p.cmdline.join(" ").toLowerCase().includes(needle);
}

/**
 * Depth-first order of `all` by ppid, siblings ordered by `cmp`. With `keep` (the filter's
 * matches), only those and their ancestors appear; ancestors kept only for context are marked.
 */
export function treeOrder(all, cmp, keep) {
  const byPid = new Map(all.map((p) => [p.pid, p]));
  let included = null;
  if (keep) {
    included = new Map();
    for (const p of keep) {
      included.set(p.pid, true);
      let up = byPid.get(p.ppid);
      // The ppid chain is finite in a consistent snapshot, but guard against a loop anyway.
      for (let hops = 0; up && !included.has(up.pid) && hops < 4096; hops++) {
        included.set(up.pid, false);
        up = byPid.get(up.ppid);
      }
    }
  }
  const children = new Map();
  const roots = [];
  for (const p of all) {
    if (included && !included.has(p.pid)) continue;
    if (p.ppid !== p.pid && byPid.has(p.ppid) && (!included || included.has(p.ppid))) {
      let list = children.get(p.ppid);
      if (!list) children.set(p.ppid, (list = []));
      list.push(p);
    } else {
      roots.push(p);
    }
  }
  const out = [];
  const stack = roots.sort(cmp).reverse().map((p) => [p, 0]);
  const seen = new Set();
  while (stack.length) {
    const [p, depth] = stack.pop();
    if (seen.has(p.pid)) continue;
    seen.add(p.pid);
    out.push({ p, depth, context: included ? included.get(p.pid) === false : false });
    const kids = children.get(p.pid);
    if (kids) {
      kids.sort(cmp);
      for (let i = kids.length - 1; i >= 0; i--) stack.push([kids[i], depth + 1]);
    }
  }
  return out;
}

export class ProcessTable {
  /**
   * root: the .ptable element (holds .ptable-head and .ptable-body > .ptable-spacer);
   * onSelect(pid) is called when a row is clicked or chosen with the keyboard.
   */
  constructor(root, { onSelect, onView }) {
    this.root = root;
    this.head = root.querySelector(".ptable-head");
    this.body = root.querySelector(".ptable-body");
    this.spacer = root.querySelector(".ptable-spacer");
    this.onSelect = onSelect;
    this.onView = onView ?? (() => {});
    this.all = [];
    this.view = []; // [{p, depth, context}]
    this.sortKey = "cpu";
    this.order = "desc";
    this.filter = "";
    this.tree = false;
    // Kernel threads (dozens of 0 B rows) are hidden until asked for, as htop's `K` does.
    this.kernelThreads = false;
    this.selected = null;
    this.pool = [];
    this.frame = false;
    this.buildHead();
    this.body.addEventListener("scroll", () => this.schedule(), { passive: true });
    new ResizeObserver(() => this.schedule()).observe(this.body);
    this.spacer.addEventListener("click", (e) => {
      const row = e.target.closest(".prow");
      if (row && row.dataset.pid) this.select(Number(row.dataset.pid));
    });
    this.body.addEventListener("keydown", (e) => this.key(e));
  }

  buildHead() {
    this.headButtons = new Map();
    for (const c of COLUMNS) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = `th c-${c.key}`;
      b.dataset.key = c.key;
      b.setAttribute("role", "columnheader");
      b.textContent = c.label;
      b.title = c.description;
      b.addEventListener("click", () => this.sortBy(c.key));
      this.head.append(b);
      this.headButtons.set(c.key, b);
    }
    this.markSort();
  }

  markSort() {
    for (const [key, b] of this.headButtons) {
      const on = key === this.sortKey;
      b.classList.toggle("sorted", on);
      b.setAttribute("aria-sort", on ? (this.order === "asc" ? "ascending" : "descending") : "none");
      b.dataset.arrow = on ? (this.order === "asc" ? "\u25B2" : "\u25BC") : "";
    }
  }

  sortBy(key) {
    if (key === this.sortKey) {
      this.order = this.order === "asc" ? "desc" : "asc";
    } else {
      this.sortKey = key;
      this.order = BY_KEY.get(key).first;
    }
    this.markSort();
    this.rebuild();
  }

  setFilter(text) {
    this.filter = text.trim().toLowerCase();
    this.body.scrollTop = 0;
    this.rebuild();
  }

  setTree(on) {
    this.tree = on;
    this.root.classList.toggle("tree", on);
    this.rebuild();
  }

  setKernelThreads(on) {
    this.kernelThreads = on;
    this.rebuild();
  }

  /** New process list from the agent. */
  setData(processes) {
    this.all = processes;
    // The network columns take room only where the agent counts network (`--net`): a process
    // that used none since the programs loaded has null too, so one with a value decides.
    const net = processes.some((p) => p.net_rx_bytes_per_sec !== null && p.net_rx_bytes_per_sec !== undefined);
    if (this.root.classList.contains("net") !== net) {
      this.root.classList.toggle("net", net);
      if (!net && (this.sortKey === "netrx" || this.sortKey === "nettx")) this.sortBy("cpu");
    }
    this.rebuild();
  }

  rebuild() {
    const cmp = compare(BY_KEY.get(this.sortKey), this.order);
    const all = this.kernelThreads ? this.all : this.all.filter((p) => !isKernelThread(p));
    const kept = this.filter ? all.filter((p) => matches(p, this.filter)) : null;
    if (this.tree) {
      this.view = treeOrder(all, cmp, kept);
    } else {
      this.view = (kept ?? all.slice()).sort(cmp).map((p) => ({ p, depth: 0, context: false }));
    }
    this.spacer.style.height = `${this.view.length * ROW_HEIGHT}px`;
    // What the view leaves out, for the page to say: kernel threads hidden that the filter
    // (if any) would have shown, and the parents shown only as context in a filtered tree.
    let kernelHidden = 0;
    if (all !== this.all) {
      for (const p of this.all) if (isKernelThread(p) && (!this.filter || matches(p, this.filter))) kernelHidden++;
    }
    this.onView({
      shown: kept ? kept.length : all.length,
      total: this.all.length,
      context: this.view.length - (kept ? kept.length : all.length),
      kernelHidden,
    });
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = true;
    requestAnimationFrame(() => {
      this.frame = false;
      this.render();
    });
  }

  /** Pids of the rows on screen (overscan left out) whose PSS is not known, top row first, at
   * most `max`: the page asks the agent to read these first. Kernel threads have no PSS to
   * read and are left out. */
  unreadPssOnScreen(max) {
    const top = this.body.scrollTop;
    const first = Math.floor(top / ROW_HEIGHT);
    const last = Math.min(this.view.length, Math.ceil((top + this.body.clientHeight) / ROW_HEIGHT));
    const pids = [];
    for (let i = first; i < last && pids.length < max; i++) {
      const p = this.view[i].p;
      if ((p.pss_bytes === null || p.pss_bytes === undefined) && !p.pss_note && p.rss_bytes > 0) pids.push(p.pid);
    }
    return pids;
  }

  /** Writes the visible slice into the row pool. */
  render() {
    const top = this.body.scrollTop;
    const height = this.body.clientHeight;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(this.view.length, Math.ceil((top + height) / ROW_HEIGHT) + OVERSCAN);
    const needed = last - first;
    while (this.pool.length < needed) this.pool.push(this.makeRow());
    for (let i = 0; i < this.pool.length; i++) {
      const row = this.pool[i];
      const idx = first + i;
      if (idx >= last) {
        if (!row.hidden) row.hidden = true;
        continue;
      }
      row.hidden = false;
      this.fill(row, this.view[idx], idx);
    }
  }

  makeRow() {
    const row = document.createElement("div");
    row.className = "prow";
    row.setAttribute("role", "row");
    row.cells = COLUMNS.map((c) => {
      const cell = document.createElement("span");
      cell.className = `td c-${c.key}`;
      row.append(cell);
      return cell;
    });
    row.shown = new Array(COLUMNS.length).fill(null);
    this.spacer.append(row);
    return row;
  }

  fill(row, item, idx) {
    const p = item.p;
    if (row.index !== idx) {
      row.index = idx;
      row.style.transform = `translateY(${idx * ROW_HEIGHT}px)`;
      row.classList.toggle("alt", idx % 2 === 1);
    }
    if (row.dataset.pid !== String(p.pid)) row.dataset.pid = String(p.pid);
    if (row.dataset.depth !== String(item.depth)) row.dataset.depth = String(item.depth);
    row.classList.toggle("selected", p.pid === this.selected);
    row.classList.toggle("context", item.context);
    for (let c = 0; c < COLUMNS.length; c++) {
      const value = COLUMNS[c].show(p);
      // Writing only what changed keeps a poll's DOM work to the cells that moved.
      if (row.shown[c] !== value) {
        row.shown[c] = value;
        row.cells[c].textContent = value;
      }
    }
    const nameCell = row.cells[2];
    // Deep chains (shells in shells, browsers' zygotes) would push the name out of its
    // column, so the indent stops growing at 12 levels; the tree order still shows nesting.
    const indent = this.tree ? `${6 + Math.min(item.depth, 12) * 11}px` : "";
    if (nameCell.style.paddingLeft !== indent) nameCell.style.paddingLeft = indent;
    if (row.title !== (text(cmdlineText(p)) ?? "")) row.title = cmdlineText(p) ?? "";
  }

  select(pid) {
    this.selected = pid;
    this.schedule();
    this.onSelect(pid);
  }

  /** Up/Down move the selection; the body is focusable so the table works without a mouse. */
  key(e) {
    if (e.key !== "ArrowDown" && e.key !== "ArrowUp") return;
    e.preventDefault();
    const at = this.view.findIndex((v) => v.p.pid === this.selected);
    const next = Math.max(0, Math.min(this.view.length - 1, at + (e.key === "ArrowDown" ? 1 : -1)));
    if (!this.view[next]) return;
    const y = next * ROW_HEIGHT;
    if (y < this.body.scrollTop) this.body.scrollTop = y;
    else if (y + ROW_HEIGHT > this.body.scrollTop + this.body.clientHeight) this.body.scrollTop = y + ROW_HEIGHT - this.body.clientHeight;
    this.select(this.view[next].p.pid);
  }
}
