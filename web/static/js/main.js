// The dashboard: polls the agent that served this page and draws what it answers.
//
// One loop, paced by the agent's sampling interval: the snapshot (host, container, agent) and
// the history since the last point every tick; the process list at most once a second (it is
// the one large answer); the selected process's detail with it. A tick starts only after the
// previous one finished, so a slow agent is never sent a pile of requests. The range shown asks
// once (on load and when another window is chosen, not every tick) for its top processes, which
// the agent folds from its store; so does a range dragged across a chart, which holds the
// charts still until Esc, a click on a chart or "back to live" returns to the live view.
// Nothing here talks to any host but the page's own origin.

import * as api from "./api.js";
import { LineChart, Heatmap, Timeline, PALETTE, cancelDrag, heat } from "./chart.js";
import * as fmt from "./format.js";
import { describeRange } from "./pick.js";
import { ProcessTable, approx } from "./table.js";

const $ = (id) => document.getElementById(id);

const timeline = new Timeline();
const state = {
  intervalMs: 1000,
  seriesNames: new Set(),
  seriesCheckedAt: 0,
  lastProcessesAt: 0,
  lastSnapshot: null,
  selectedPid: null,
  stopped: false, // Set while the agent wants a token.
  timer: null,
  needFullHistory: true,
  paused: false,
  gen: 0, // Which polling loop is current (see tick).
};

// ---- charts -------------------------------------------------------------------------------

function chart(id, unit, series, extra = {}) {
  const legendId = id.replace(/^chart-/, "") + "-legend";
  return new LineChart($(id), timeline, { unit, series, legend: $(legendId), ...extra });
}

// Exported for the browser tests, which read what each chart drew (LineChart.labels).
export const charts = {
  cpu: chart("chart-cpu", "%", [], { yMax: 100 }),
  mem: chart("chart-mem", "bytes", []),
  psi: chart("chart-psi", "%", []),
  disk: chart("chart-disk", "bytes/s", []),
  net: chart("chart-net", "bytes/s", []),
  cgMem: chart("chart-cg-mem", "bytes", []),
  cgCpu: chart("chart-cg-cpu", "cpus", []),
  agentRss: chart("chart-agent-rss", "bytes", []),
  agentCpu: chart("chart-agent-cpu", "%", []),
};
const perCpu = new Heatmap($("chart-percpu"), timeline);

/** Keeps the series a chart asks for to those the agent has, so a missing one is no 400. */
function only(list) {
  return list.filter((s) => s.name.startsWith("derived.") || state.seriesNames.has(s.name));
}

function configureCharts() {
  const has = (n) => state.seriesNames.has(n);
  charts.cpu.setSeries(
    only([
      { name: "host.cpu.busy_percent", label: "busy", width: 2 },
      { name: "host.cpu.user_percent", label: "user" },
      { name: "host.cpu.nice_percent", label: "nice" },
      { name: "host.cpu.system_percent", label: "system" },
      { name: "host.cpu.irq_percent", label: "irq" },
      { name: "host.cpu.softirq_percent", label: "softirq" },
      { name: "host.cpu.iowait_percent", label: "iowait" },
      { name: "host.cpu.steal_percent", label: "steal" },
    ]),
  );
  const cpuRows = [...state.seriesNames]
    .map((n) => /^host\.cpu(\d+)\.busy_percent$/.exec(n))
    .filter(Boolean)
    .sort((a, b) => Number(a[1]) - Number(b[1]))
    .map((m) => m[0]);
  perCpu.setRows(cpuRows);
  perCpu.canvas.style.height = `${Math.min(160, Math.max(36, cpuRows.length * 14))}px`;
  charts.mem.setSeries(
    only([
      { name: "host.memory.used_bytes", label: "used", width: 2 },
      { name: "host.memory.available_bytes", label: "available" },
      { name: "host.memory.swap_used_bytes", label: "swap used" },
    ]),
  );
  charts.psi.setSeries(
    only([
      { name: "host.pressure_cpu.some.avg10", label: "cpu some" },
      { name: "host.pressure_cpu.full.avg10", label: "cpu full", dash: [4, 3] },
      { name: "host.pressure_memory.some.avg10", label: "memory some" },
      { name: "host.pressure_memory.full.avg10", label: "memory full", dash: [4, 3] },
      { name: "host.pressure_io.some.avg10", label: "io some" },
      { name: "host.pressure_io.full.avg10", label: "io full", dash: [4, 3] },
    ]),
  );
  charts.disk.setSeries(
    only([
      { name: "host.disk.read_bytes_per_sec", label: "read" },
      { name: "host.disk.write_bytes_per_sec", label: "write" },
    ]),
  );
  charts.net.setSeries(
    only([
      { name: "host.net.rx_bytes_per_sec", label: "received" },
      { name: "host.net.tx_bytes_per_sec", label: "sent" },
    ]),
  );
  charts.cgMem.setSeries(
    only([
      { name: "container.memory_current_bytes", label: "current", width: 2 },
      { name: "container.memory_limit_bytes", label: "limit", color: PALETTE[1], dash: [6, 4] },
    ]),
  );
  charts.cgCpu.setSeries(
    only([
      { name: "container.cpu_used_cpus", label: "used", width: 2 },
      { name: "container.effective_cpus", label: "effective", color: PALETTE[1], dash: [6, 4] },
      { name: "derived.host.online_cpus", label: "host online", color: PALETTE[7], dash: [2, 3] },
    ]),
  );
  charts.agentRss.setSeries(only([{ name: "agent.resident_bytes", label: "RSS", width: 2 }]));
  charts.agentCpu.setSeries([
    ...(has("agent.cpu_seconds_total") ? [{ name: "derived.agent.cpu_percent", label: "whole agent", width: 2 }] : []),
    ...(has("agent.last_sample.cpu_seconds") ? [{ name: "derived.agent.sample_percent", label: "sampling cycle" }] : []),
  ]);
}

/** The series one history request asks for: every plotted one that the agent has. */
function wantedSeries() {
  const names = new Set();
  for (const c of Object.values(charts)) for (const s of c.series) if (!s.name.startsWith("derived.")) names.add(s.name);
  for (const n of perCpu.names) names.add(n);
  for (const n of ["agent.cpu_seconds_total", "agent.last_sample.cpu_seconds"]) if (state.seriesNames.has(n)) names.add(n);
  // The API takes at most 256 names; on a very wide host the last CPUs are left out.
  return [...names].slice(0, 256);
}

/** Series computed here from others: rates of counters and constants from the snapshot. */
function derive() {
  const t = timeline.times;
  const cpu = timeline.series("agent.cpu_seconds_total");
  const sample = timeline.series("agent.last_sample.cpu_seconds");
  const online = state.lastSnapshot?.container?.host_online_cpus ?? state.lastSnapshot?.host?.online_cpus ?? null;
  const agentPct = new Array(t.length).fill(null);
  const samplePct = new Array(t.length).fill(null);
  for (let i = 0; i < t.length; i++) {
    if (cpu && i > 0 && cpu[i] !== null && cpu[i - 1] !== null && t[i] > t[i - 1]) {
      const d = cpu[i] - cpu[i - 1];
      // A counter that went backwards (agent restarted) has no rate, not a negative one.
      if (d >= 0) agentPct[i] = (100 * d) / ((t[i] - t[i - 1]) / 1000);
    }
    if (sample && sample[i] !== null) samplePct[i] = (100 * sample[i]) / (state.intervalMs / 1000);
  }
  timeline.values.set("derived.agent.cpu_percent", agentPct);
  timeline.values.set("derived.agent.sample_percent", samplePct);
  timeline.values.set("derived.host.online_cpus", new Array(t.length).fill(online));
}

function redrawCharts() {
  for (const c of Object.values(charts)) c.invalidate();
  perCpu.invalidate();
}

// ---- polling ------------------------------------------------------------------------------

async function refreshSeriesList(force) {
  const now = Date.now();
  if (!force && now - state.seriesCheckedAt < 15000) return;
  state.seriesCheckedAt = now;
  const list = await api.get("/api/v1/history/series");
  const names = new Set(list.series);
  const changed = names.size !== state.seriesNames.size || [...names].some((n) => !state.seriesNames.has(n));
  if (changed) {
    state.seriesNames = names;
    configureCharts();
    state.needFullHistory = true;
  }
}

async function refreshHistory() {
  const series = wantedSeries();
  // While a range is picked (or being dragged) the charts hold still: newer points are asked
  // for when the live view comes back, from the last one held.
  if (!series.length || timeline.held !== null) return;
  let answer;
  if (state.needFullHistory || timeline.last === null) {
    const width = Math.max(300, Math.round(window.innerWidth));
    // A range longer than the agent's in-memory ring is answered from its store for the
    // older part (store_points of them), downsampled to about one point per pixel.
    const windowMs = timeline.windowMs;
    answer = await api.get(api.url("/api/v1/history", { series: series.join(","), since: `${windowMs}ms`, max_points: width }));
    if (windowMs !== timeline.windowMs) return; // The range changed while this was on its way.
    timeline.clear();
    state.needFullHistory = false;
    renderRangeNote(answer);
  } else {
    answer = await api.get(api.url("/api/v1/history", { series: series.join(","), from: timeline.last + 1 }));
  }
  timeline.append(answer);
  derive();
  redrawCharts();
}

/** Says where the charts' points came from when some are older than the in-memory ring. */
function renderRangeNote(answer) {
  const store = answer.store;
  let note = "";
  if (answer.store_points > 0) note = `${fmt.count(answer.store_points)} older points from the agent's store`;
  if (store?.problems?.length) note += `${note ? "; " : ""}store: ${store.problems[0]}`;
  $("range-note").textContent = note;
}

/** Shows the last `ms` of history on every chart, live; the header's Window buttons land here.
 * A picked range is let go. */
function setRange(ms) {
  for (const b of document.querySelectorAll("[data-range-ms]")) b.setAttribute("aria-pressed", String(Number(b.dataset.rangeMs) === ms));
  cancelDrag();
  timeline.pick = null;
  timeline.held = null;
  showPick(null);
  timeline.windowMs = ms;
  timeline.clear();
  redrawCharts();
  restart();
  loadReport({ since: ms });
}

// ---- a range picked on the charts -----------------------------------------------------------

/** A drag across a chart picked `range` ({from, to}): its top processes replace the window's.
 * `null` (a click on a chart) goes back to the live view, if a range was picked. */
timeline.onPick = (range) => {
  if (range) {
    showPick(range);
    loadReport({ range });
  } else if (!$("pick").hidden) {
    livePick();
  }
};

/** Back to the live view: no band, the charts follow the newest point, the window's top
 * processes. */
function livePick() {
  cancelDrag();
  timeline.pick = null;
  timeline.held = null;
  timeline.trim();
  showPick(null);
  redrawCharts();
  loadReport({ since: timeline.windowMs });
}

/** The header says which range is picked, beside the button that lets it go. */
function showPick(range) {
  $("pick").hidden = !range;
  $("pick-text").textContent = range ? `picked ${describeRange(range)}` : "";
}

$("pick-clear").addEventListener("click", livePick);
document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  // Esc ends a drag under way (keeping the pick there was before it); else lets a pick go.
  if (!cancelDrag() && timeline.pick) livePick();
});

// ---- top processes over the selected range ------------------------------------------------

// What the panel shows ({since: ms} for the window, or {range} picked on a chart), and whether
// a request is out. One request at a time: a pick made meanwhile waits, and only the last one
// made is asked for when the request ends (its answer is then not shown).
const report = { want: null, asking: false };
const CMDLINE_CHARS = 80;
// A report is bounded by its frame budget on the agent's side; this bounds the wait here, so a
// request that never ends cannot hold every later pick back.
const REPORT_TIMEOUT_MS = 120000;

/** The window's label as its button reads ("5 min"), else a duration. */
function windowLabel(ms) {
  const button = document.querySelector(`[data-range-ms="${ms}"]`);
  return button ? button.textContent : fmt.duration(ms / 1000);
}

/** Shows the top processes of `want`: `{since: ms}` (the last ms, as the charts' window) or
 * `{range: {from, to}}` (unix ms, picked on a chart). */
function loadReport(want) {
  report.want = want;
  $("range-report").setAttribute("aria-busy", "true");
  $("report-range").textContent = want.range ? describeRange(want.range) : `last ${windowLabel(want.since)}`;
  $("report-note").textContent = "computing from the agent's store…";
  $("report-headline").textContent = "";
  if (!report.asking) askReport();
}

/** Asks the agent for the range's top processes (folded from its store on a blocking thread,
 * a bounded number of samples) until the answer it gets is for the range last wanted, and
 * fills the two tables with it. Every process-derived string goes in with textContent. */
async function askReport() {
  report.asking = true;
  let want;
  let answer = null;
  let error = null;
  do {
    want = report.want;
    const params = want.range ? { from: want.range.from, to: want.range.to, top: 10 } : { since: `${want.since}ms`, top: 10 };
    try {
      answer = await api.get(api.url("/api/v1/report", params), { signal: AbortSignal.timeout(REPORT_TIMEOUT_MS) });
      error = null;
    } catch (e) {
      error = e.name === "TimeoutError" ? new Error(`no answer in ${fmt.duration(REPORT_TIMEOUT_MS / 1000)}`) : e;
    }
  } while (want !== report.want);
  report.asking = false;
  showReport(answer, error);
}

function showReport(answer, error) {
  const panel = $("range-report");
  panel.setAttribute("aria-busy", "false");
  if (error) {
    $("report-note").textContent = `could not compute the report: ${error.message}`;
    fillReportTable("report-cpu", [], () => "");
    fillReportTable("report-rss", [], () => "");
    showReportNetwork([]);
    return;
  }
  if (!answer.available) {
    $("report-note").textContent = answer.reason ?? "no store to report from";
    fillReportTable("report-cpu", [], () => "");
    fillReportTable("report-rss", [], () => "");
    showReportNetwork([]);
    return;
  }
  const problems = answer.problems?.length ? `; ${answer.problems[0]}` : "";
  $("report-note").textContent = `${answer.note}${problems} (${fmt.duration(answer.elapsed_ms / 1000)})`;
  const head = (name) => answer.headline.find((h) => h.name === name);
  const busy = head("host.cpu.busy_percent");
  const used = head("host.memory.used_bytes");
  const parts = [`${fmt.count(answer.processes_seen)} processes seen`];
  if (busy) parts.push(`CPU busy ${fmt.percent(busy.mean)} on average, ${fmt.percent(busy.max)} at most`);
  if (used) parts.push(`memory used up to ${fmt.bytes(used.max)}`);
  $("report-headline").textContent = parts.join(" · ");
  fillReportTable("report-cpu", answer.top_cpu, (p) => fmt.duration(p.cpu_seconds));
  fillReportTable("report-rss", answer.top_rss_peak, (p) => fmt.bytes(p.rss_peak_bytes));
  showReportNetwork(answer.top_network ?? []);
}

/** The top processes by network bytes over the range: a card only where the recording has
 * network (`--net`), so a store without it gives up no room. */
function showReportNetwork(rows) {
  $("report-net-card").hidden = rows.length === 0;
  fillReportTable("report-net", rows, (p) => `${fmt.bytes(p.net_rx_bytes)}, ${fmt.bytes(p.net_tx_bytes)}`);
}

// ---- process groups over a range (up to the whole retention, through the rollups) -------

const groupsView = { gen: 0 };

/** Asks for every stored group over the last `ms` (`/api/v1/report?groups=all`: raw samples
 * for the recent part, rollup rows for the older) and fills the groups table. Group names come
 * from rules, cgroups and users: they go in with textContent. */
async function loadGroups(ms) {
  const gen = ++groupsView.gen;
  const panel = $("groups");
  panel.setAttribute("aria-busy", "true");
  $("groups-note").textContent = "computing from the agent's store…";
  let answer;
  try {
    answer = await api.get(api.url("/api/v1/report", { since: `${ms}ms`, top: 1, groups: "all" }));
  } catch (e) {
    if (gen !== groupsView.gen) return;
    panel.setAttribute("aria-busy", "false");
    $("groups-note").textContent = `could not compute the groups: ${e.message}`;
    fillGroupsTable([]);
    return;
  }
  if (gen !== groupsView.gen) return;
  panel.setAttribute("aria-busy", "false");
  if (!answer.available) {
    $("groups-note").textContent = answer.reason ?? "no store to report from";
    fillGroupsTable([]);
    return;
  }
  const groups = answer.groups ?? [];
  const tier = answer.tier
    ? `${fmt.count(answer.tier.rows)} ${answer.tier.tier === "1h" ? "hour" : "minute"} rollup rows, then raw samples`
    : "raw samples";
  $("groups-note").textContent = groups.length
    ? `${groups.length} groups from ${tier} (${fmt.duration(answer.elapsed_ms / 1000)})`
    : "no groups recorded in this range: run serve or record with --groups cgroup, user or a rules file";
  fillGroupsTable(groups);
}

function fillGroupsTable(groups) {
  const body = $("groups-table").tBodies[0];
  // Network columns only where some group's network was recorded (serve or record --net).
  const hasNet = groups.some((g) => g.headline.some((x) => x.name === "net.rx" || x.name === "net.tx"));
  for (const th of $("groups-table").querySelectorAll("th.c-net")) th.hidden = !hasNet;
  const rows = groups.map((g) => {
    const h = (name) => g.headline.find((x) => x.name === name);
    const mean = (name, f) => f(h(name)?.mean ?? null);
    const max = (name, f) => f(h(name)?.max ?? null);
    const tr = document.createElement("tr");
    const cells = [
      ["c-name", g.name],
      ["c-value", mean("processes", (v) => fmt.num(v, 1))],
      ["c-value", mean("cpu", fmt.percent)],
      ["c-value", max("cpu", fmt.percent)],
      ["c-value", mean("rss", fmt.bytes)],
      ["c-value", max("rss", fmt.bytes)],
      ["c-value", mean("faults.minor", (v) => fmt.num(v, 1))],
      ["c-value", mean("faults.major", (v) => fmt.num(v, 2))],
      ...(hasNet ? [["c-value", mean("net.rx", fmt.bytesPerSec)], ["c-value", mean("net.tx", fmt.bytesPerSec)]] : []),
      ["c-value", mean("started", (v) => fmt.num(v, 2))],
    ];
    for (const [cls, text] of cells) {
      const td = document.createElement("td");
      td.className = cls;
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  });
  body.replaceChildren(...rows);
  if (!rows.length) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = hasNet ? 11 : 9;
    td.className = "empty";
    td.textContent = "none in this range";
    tr.append(td);
    body.append(tr);
  }
}

function fillReportTable(id, rows, value) {
  const body = $(id).tBodies[0];
  const cut = (s) => (s.length > CMDLINE_CHARS ? s.slice(0, CMDLINE_CHARS - 1) + "\u2026" : s);
  body.replaceChildren(
    ...rows.map((p) => {
      const tr = document.createElement("tr");
      const cells = [
        ["c-name", p.name],
        ["c-pid", String(p.pid)],
        ["c-cmdline", p.cmdline === null ? fmt.DASH : cut(p.cmdline.join(" "))],
        ["c-value", value(p)],
      ];
      for (const [cls, text] of cells) {
        const td = document.createElement("td");
        td.className = cls;
        td.textContent = text;
        if (cls === "c-cmdline" && p.cmdline !== null) td.title = p.cmdline.join(" ");
        tr.append(td);
      }
      return tr;
    }),
  );
  if (!rows.length) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = 4;
    td.className = "empty";
    td.textContent = "none in this range";
    tr.append(td);
    body.append(tr);
  }
}

for (const b of document.querySelectorAll("[data-range-ms]")) b.addEventListener("click", () => setRange(Number(b.dataset.rangeMs)));

async function refreshSnapshot() {
  // The table lists processes from /api/v1/processes; the snapshot's own top list is not needed.
  const s = await api.get("/api/v1/snapshot?top=0");
  state.lastSnapshot = s;
  const interval = s.agent?.interval_secs;
  if (interval > 0) state.intervalMs = Math.max(100, interval * 1000);
  renderHost(s);
  renderContainer(s.container, s.host);
  renderAgent(s.agent);
}

async function refreshProcesses(force) {
  const now = Date.now();
  if (!force && now - state.lastProcessesAt < Math.max(1000, state.intervalMs)) return;
  state.lastProcessesAt = now;
  // The rows on screen without PSS are read first (as `top` asks for its own), at most 16.
  const unread = table.unreadPssOnScreen(16);
  const list = await api.get(unread.length ? api.url("/api/v1/processes", { pss_first: unread.join(",") }) : "/api/v1/processes");
  table.setData(list.processes);
  $("proc-count").textContent = `${fmt.count(list.total)} processes`;
}

async function refreshDetail() {
  const pid = state.selectedPid;
  if (pid === null) return;
  try {
    const p = await api.get(`/api/v1/processes/${pid}`);
    if (state.selectedPid === pid) renderDetail(p, null);
  } catch (e) {
    if (e.status === 404 && state.selectedPid === pid) renderDetail(null, `Process ${pid} is gone: it was not in the latest sample.`);
    else throw e;
  }
}

// ---- alerts (serve --rules) -------------------------------------------------------------

const alertsView = { off: false, at: 0 };

/** The banner: what fires and what is pending, from /api/v1/alerts, every few seconds. An agent
 * without rules answers `enabled: false`: the banner stays hidden and is not asked again. Rule
 * names, labels and summaries come from the rules file and processes: textContent only. */
async function refreshAlerts() {
  if (alertsView.off || Date.now() - alertsView.at < 2000) return;
  alertsView.at = Date.now();
  const a = await api.get("/api/v1/alerts");
  if (a.enabled === false) {
    alertsView.off = true;
    $("alerts").hidden = true;
    return;
  }
  const instances = [];
  for (const r of a.rules ?? []) {
    for (const i of r.instances ?? []) instances.push({ rule: r, i });
  }
  instances.sort((x, y) => (x.i.state === y.i.state ? 0 : x.i.state === "firing" ? -1 : 1));
  const box = $("alerts");
  box.hidden = false;
  box.dataset.state = a.firing > 0 ? "firing" : a.pending > 0 ? "pending" : "quiet";
  const rules = (a.rules ?? []).length;
  $("alerts-head").textContent = a.firing + a.pending > 0
    ? `Alerts: ${a.firing} firing, ${a.pending} pending (${rules} rules)`
    : `No alert firing (${rules} rules)`;
  const list = $("alerts-list");
  const items = instances.slice(0, 20).map(({ rule, i }) => {
    const li = document.createElement("li");
    li.dataset.state = i.state;
    const st = document.createElement("span");
    st.className = "state";
    st.textContent = i.state.toUpperCase();
    const labels = Object.entries(i.labels ?? {})
      .filter(([k]) => k !== "alertname" && k !== "severity")
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
    const notes = [i.silenced ? "silenced" : "", i.flapping ? "flapping" : ""].filter(Boolean).join(", ");
    const text = document.createElement("span");
    text.textContent = ` ${rule.name} (${rule.severity}) ${i.value_text}${labels ? ` — ${labels}` : ""}` +
      ` since ${new Date(i.active_at).toLocaleTimeString()}${notes ? ` [${notes}]` : ""}`;
    li.append(st, text);
    return li;
  });
  if (instances.length > 20) {
    const li = document.createElement("li");
    li.textContent = `and ${instances.length - 20} more (proctor alerts status)`;
    items.push(li);
  }
  if (a.reload_error) {
    const li = document.createElement("li");
    li.textContent = `rules file: ${a.reload_error}`;
    items.push(li);
  }
  list.replaceChildren(...items);
}

function setStatus(kind, message) {
  const el = $("status");
  el.dataset.state = kind;
  el.textContent = message;
}

/** One poll. `gen` ties it to the loop that scheduled it: a restart starts a new loop, and a
 * tick of an older loop that is still awaiting answers ends without scheduling another. */
async function tick(gen) {
  state.timer = null;
  if (state.stopped || gen !== state.gen) return;
  const started = performance.now();
  let delay = state.intervalMs;
  if (!document.hidden && !state.paused) {
    try {
      await refreshSeriesList(false);
      await Promise.all([refreshSnapshot(), refreshHistory(), refreshProcesses(false), refreshDetail(), refreshAlerts()]);
      const age = Date.now() - (state.lastSnapshot?.time_unix_ms ?? Date.now());
      if (age > Math.max(5000, 5 * state.intervalMs)) setStatus("stale", `stale: last sample ${fmt.duration(age / 1000)} ago`);
      else setStatus("live", `live, every ${fmt.duration(state.intervalMs / 1000)}`);
    } catch (e) {
      if (state.stopped || gen !== state.gen) return;
      if (e.code === "unreachable") {
        setStatus("down", "agent unreachable, retrying");
        delay = Math.max(2000, delay);
      } else {
        setStatus("error", `error: ${e.message}`);
        delay = Math.max(2000, delay);
      }
    }
  }
  if (state.stopped || gen !== state.gen) return;
  const elapsed = performance.now() - started;
  state.timer = setTimeout(tick, Math.max(0, delay - elapsed), gen);
}

function restart() {
  if (state.timer !== null) clearTimeout(state.timer);
  state.stopped = false;
  state.needFullHistory = true;
  state.seriesCheckedAt = 0;
  state.lastProcessesAt = 0;
  state.gen++;
  state.timer = setTimeout(tick, 0, state.gen);
}

api.on("unauthorized", () => {
  state.stopped = true;
  if (state.timer !== null) clearTimeout(state.timer);
  state.timer = null;
  setStatus("auth", "token required");
  $("auth").hidden = false;
  $("auth-token").focus();
});

$("auth").addEventListener("submit", (e) => {
  e.preventDefault();
  api.setToken($("auth-token").value);
  $("auth-token").value = "";
  $("auth").hidden = true;
  setStatus("connecting", "connecting…");
  restart();
  // The report asked before the token was known got a 401: ask again.
  loadReport(timeline.pick ? { range: timeline.pick } : { since: timeline.windowMs });
  loadGroups(Number($("groups-range").value));
});

// ---- host ---------------------------------------------------------------------------------

function renderHost(s) {
  const h = s.host;
  const states = Object.entries(s.processes.states)
    .map(([k, v]) => `${v} ${k}`)
    .join(", ");
  $("summary").textContent =
    `${fmt.count(s.processes.count)} processes (${states}), ${fmt.count(s.processes.threads)} threads` +
    (h.load ? ` · load ${[h.load.avg1, h.load.avg5, h.load.avg15].map((l) => l.toFixed(2)).join(" ")}` : "") +
    (h.uptime_secs !== null ? ` · up ${fmt.duration(h.uptime_secs)}` : "");
  $("cpu-sub").textContent = `${h.online_cpus ?? fmt.DASH} online · now ${fmt.percent(h.cpu?.busy_percent)} busy`;
  $("mem-sub").textContent = `total ${fmt.bytes(h.memory.total_bytes)}, swap ${fmt.bytes(h.memory.swap_total_bytes)}`;
  const psi = h.pressure_cpu?.some;
  $("psi-sub").textContent = h.pressure_cpu || h.pressure_memory || h.pressure_io ? `cpu some ${fmt.percent(psi?.avg10, 2)}` : "not available on this kernel";
  $("disk-sub").textContent = h.disks.length ? h.disks.map((d) => d.device).join(", ") : "no disks";
  $("net-sub").textContent = h.nets.length ? h.nets.map((n) => n.device).join(", ") : "no interfaces";
  renderPerCpuNow(h.per_cpu);
  renderPower(h);
}

/** Watts per energy domain and the host's GPUs; the card is hidden where the host has none. */
function renderPower(h) {
  const power = h.power ?? [];
  const gpus = h.gpus ?? [];
  $("power-card").hidden = power.length === 0 && gpus.length === 0;
  $("power-sub").textContent = known(h.power_host_watts) ? `host ${fmt.byUnit("W", h.power_host_watts)}` : "";
  const items = [];
  for (const p of power) {
    items.push(`${p.domain}: ${fmt.byUnit("W", p.watts)}${p.in_host_total ? " (in the host's total)" : ""}`);
  }
  for (const g of gpus) {
    const parts = [`${fmt.percent(g.busy_percent)} busy`];
    if (known(g.memory_used_bytes)) {
      parts.push(`${fmt.bytes(g.memory_used_bytes)}${known(g.memory_total_bytes) ? ` of ${fmt.bytes(g.memory_total_bytes)}` : ""}`);
    }
    if (known(g.power_watts)) parts.push(fmt.byUnit("W", g.power_watts));
    parts.push(`${g.clients} client${g.clients === 1 ? "" : "s"}`);
    items.push(`${g.id} ${g.name}: ${parts.join(", ")}`);
  }
  const list = $("power-list");
  list.replaceChildren(
    ...items.map((text) => {
      const li = document.createElement("li");
      li.textContent = text;
      return li;
    }),
  );
}

function known(v) {
  return v !== null && v !== undefined;
}

function renderPerCpuNow(perCpuNow) {
  const box = $("percpu-now");
  while (box.children.length > perCpuNow.length) box.lastChild.remove();
  while (box.children.length < perCpuNow.length) {
    const item = document.createElement("div");
    item.className = "bar";
    const label = document.createElement("span");
    label.className = "bar-label";
    const track = document.createElement("span");
    track.className = "bar-track";
    const fill = document.createElement("span");
    fill.className = "bar-fill";
    track.append(fill);
    const value = document.createElement("span");
    value.className = "bar-value";
    item.append(label, track, value);
    box.append(item);
  }
  perCpuNow.forEach((c, i) => {
    const [label, track, value] = box.children[i].children;
    label.textContent = `cpu${c.cpu}`;
    track.firstChild.style.width = `${Math.max(0, Math.min(100, c.busy_percent))}%`;
    track.firstChild.style.background = heat(c.busy_percent);
    value.textContent = fmt.percent(c.busy_percent);
  });
}

// ---- container ----------------------------------------------------------------------------

function gauge(fillId, textId, used, limit, text) {
  const fill = $(fillId);
  const share = used !== null && limit ? used / limit : null;
  fill.style.width = share === null ? "0%" : `${Math.min(100, share * 100)}%`;
  fill.dataset.level = share === null ? "unknown" : share > 0.9 ? "high" : share > 0.7 ? "warn" : "ok";
  $(textId).textContent = text + (share === null ? "" : ` (${fmt.percent(share * 100)})`);
}

function facts(dl, rows) {
  dl.replaceChildren();
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dl.append(dt, dd);
  }
}

function renderContainer(c, host) {
  $("cg-sub").textContent = c.error
    ? `no cgroup view: ${c.error}`
    : `cgroup ${c.cgroup_version ?? "?"} ${c.cgroup_path ?? ""}${c.pid ? ` (of pid ${c.pid})` : ""}`;
  const warnings = $("cg-warnings");
  warnings.replaceChildren(
    ...c.warnings.map((w) => {
      const p = document.createElement("p");
      p.className = "warning";
      p.textContent = w;
      return p;
    }),
  );
  gauge(
    "cg-mem-fill",
    "cg-mem-text",
    c.memory_current_bytes,
    c.memory_limit_bytes,
    `${fmt.bytes(c.memory_current_bytes)} of ${fmt.bytes(c.memory_limit_bytes)}` +
      (c.memory_limit_source ? ` (limit from ${c.memory_limit_source})` : "") +
      (c.memory_peak_bytes !== null ? `, peak ${fmt.bytes(c.memory_peak_bytes)}` : ""),
  );
  gauge(
    "cg-cpu-fill",
    "cg-cpu-text",
    c.cpu_used_cpus,
    c.effective_cpus,
    `${fmt.num(c.cpu_used_cpus, 2)} of ${fmt.num(c.effective_cpus, 2)} effective CPUs`,
  );
  const online = c.host_online_cpus ?? host.online_cpus;
  const rows = [
    ["host online", online],
    ["affinity", c.affinity_cpus],
    ["cpuset", c.cpuset_cpus],
    ["quota", c.quota_cpus],
    ["effective", c.effective_cpus],
  ];
  const scale = Math.max(1, ...rows.map(([, v]) => v ?? 0));
  const box = $("cg-cpus");
  box.replaceChildren(
    ...rows.map(([label, v]) => {
      const item = document.createElement("div");
      item.className = "bar" + (label === "effective" ? " effective" : "");
      const l = document.createElement("span");
      l.className = "bar-label";
      l.textContent = label;
      const track = document.createElement("span");
      track.className = "bar-track";
      const fill = document.createElement("span");
      fill.className = "bar-fill";
      fill.style.width = v === null ? "0%" : `${(100 * v) / scale}%`;
      track.append(fill);
      const value = document.createElement("span");
      value.className = "bar-value";
      value.textContent = v === null ? "no limit" : fmt.num(v, 2);
      item.append(l, track, value);
      return item;
    }),
  );
  facts($("cg-facts"), [
    ["quota from", c.quota_path ?? fmt.DASH],
    ["throttled", `${fmt.count(c.cpu_throttled_periods_total)} periods, ${fmt.duration(c.cpu_throttled_seconds_total)}`],
    ["pids", fmt.count(c.pids_current)],
    ["cpu pressure", c.pressure_cpu?.some ? `${fmt.percent(c.pressure_cpu.some.avg10, 2)} some` : fmt.DASH],
    ["memory pressure", c.pressure_memory?.some ? `${fmt.percent(c.pressure_memory.some.avg10, 2)} some` : fmt.DASH],
    ["limits read", c.limits_age_secs !== null ? `${fmt.duration(c.limits_age_secs)} ago` : fmt.DASH],
  ]);
}

// ---- agent --------------------------------------------------------------------------------

function renderAgent(a) {
  $("agent-sub").textContent = `pid ${a.pid}, version ${a.version}, up ${fmt.duration(a.uptime_secs)}`;
  const recent = timeline.series("derived.agent.cpu_percent");
  let recentPct = null;
  if (recent) for (let i = recent.length - 1; i >= 0 && recentPct === null; i--) recentPct = recent[i];
  const last = a.last_sample;
  const errors = Object.values(a.errors_total).reduce((x, y) => x + y, 0);
  facts($("agent-facts"), [
    ["CPU now", fmt.percent(recentPct, 2) + " of one CPU"],
    ["CPU average", fmt.percent(a.cpu_percent_of_one_cpu_avg, 2) + ` (${fmt.duration(a.cpu_seconds_total)} total)`],
    ["resident", `${fmt.bytes(a.resident_bytes)} (max ${fmt.bytes(a.max_resident_bytes)})`],
    ["last sample", `${fmt.duration(last.cpu_seconds)} CPU, ${fmt.duration(last.wall_seconds)} wall`],
    ["files read", `${fmt.count(last.files_read)} (${fmt.count(last.files_opened)} opened, ${fmt.count(last.fds_kept)} fds kept)`],
    ["processes seen", fmt.count(last.processes_seen)],
    ["history", `${fmt.bytes(a.history.bytes)} of ${fmt.bytes(a.history.max_bytes)}, ${fmt.count(a.history.points)}/${fmt.count(a.history.capacity)} points, ${a.history.series} series`],
    ["targets' locks", targetLocksText(a)],
    ...(a.process_net_walk ? [["connections", netWalkText(a.process_net_walk)]] : []),
    ["PSS worker", a.pss_worker ? pssWorkerText(a.pss_worker) : "off"],
    ["samples", `${fmt.count(a.samples_total)} (${fmt.count(a.missed_ticks_total)} missed ticks)`],
    ["errors", errors ? Object.entries(a.errors_total).map(([k, v]) => `${k} ${v}`).join(", ") : "none"],
    ["HTTP requests", fmt.count(a.http?.requests_total)],
    ...(a.remote_write ?? []).map((q) => [q.protocol === "otlp" ? "OTLP" : "remote write", remoteWriteText(q)]),
  ]);
}

/** The PSS worker in words: its reads, CPU and budget, and a rest of a second or more. */
function pssWorkerText(w) {
  const rest = restShown(w) ? `, resting ${fmt.duration(w.resting_seconds)} more` : "";
  const putOff = w.reads_put_off_busy ? `, ${fmt.count(w.reads_put_off_busy)} put off while the host was busy` : "";
  const slice = w.slice_seconds ? `, slice ${fmt.duration(w.slice_seconds)}` : "";
  return `${fmt.count(w.reads)} reads, ${fmt.duration(w.cpu_seconds)} CPU, budget ${budgetText(w)}${slice}${rest}${putOff}`;
}

/** The stall ledger over the agent's life in words: how long its PSS and command-line reads held
 * the targets' mmap locks, the longest hold and its process, and what the targets' threads
 * waited on them where the kernel's trace says (proctor doctor says why not elsewhere). */
function targetLocksText(a) {
  const pss = a.pss_worker;
  const cmd = a.cmdline_worker;
  const parts = [];
  if (pss) {
    const longest = pss.max_lock_pid ? `, longest ${fmt.duration(pss.max_lock_seconds)} (pid ${pss.max_lock_pid})` : "";
    parts.push(`PSS reads held them ${fmt.duration(pss.lock_seconds_total)}${longest}`);
  }
  if (cmd) parts.push(`command-line reads ${fmt.duration(cmd.lock_seconds_total)}`);
  if (!parts.length) return "none taken (no PSS or command-line reads)";
  const waited =
    pss?.target_waited_seconds_total != null
      ? `; the targets waited ${fmt.duration(pss.target_waited_seconds_total)} on the PSS reads`
      : "; what the targets waited is not traced";
  return parts.join(", ") + waited;
}

/** Where each process's TCP connections come from, in words (with --net): a walk of the sockets
 * proctor's programs own, each sample, or the kernel's TCP tables every 10 s where the kernel
 * refuses that walk, with the other network namespaces (a container's) entered or not. */
function netWalkText(w) {
  if (w.how !== "tcp_tables") return "each sample, from the sockets proctor's programs own (every network namespace)";
  const parts = [`from the kernel's TCP tables every 10 s (the walk of owned sockets is refused)`];
  if (w.other_namespaces) {
    let ns = `other network namespaces: ${fmt.count(w.other_namespaces)}, ${fmt.count(w.other_namespaces_walked)} entered by the last walk`;
    if (w.other_namespaces_skipped) ns += `, ${fmt.count(w.other_namespaces_skipped)} left for the next`;
    if (w.other_namespaces_refused) ns += `; not entered: ${w.other_namespaces_refused}`;
    parts.push(ns);
  }
  return parts.join("; ");
}

/** One remote-write queue in words: "URL: 3.2 s behind (3 samples), 1,204 samples sent, no
 * failures" (docs/scale-out.md). The URL is text, like every value in these facts. */
function remoteWriteText(q) {
  const failed = Object.entries(q.failed_total ?? {});
  const failures = failed.length
    ? failed.map(([reason, n]) => `${fmt.count(n)} failed (${reason})`).join(", ") + (q.last_error ? `; last: ${q.last_error}` : "")
    : "no failures";
  const behind =
    q.lag_secs == null
      ? "nothing delivered yet"
      : `${fmt.duration(q.lag_secs)} behind (${fmt.count(q.backlog_samples)} sample${q.backlog_samples === 1 ? "" : "s"})` +
        (q.backfilling ? ", backfilling from the store" : "");
  const protocol = q.protocol === "otlp" ? "OTLP" : q.protocol_version === "2.0.0" ? "remote write 2.0" : "remote write 1.0";
  const fallback = q.fallback ? ` (asked for 2.0: ${q.fallback})` : "";
  const rejected = q.points_rejected_total ? `, ${fmt.count(q.points_rejected_total)} points refused` : "";
  return `${q.url} (${protocol}${fallback}): ${behind}, ${fmt.count(q.samples_sent_total)} samples sent${rejected}, ${failures}`;
}

// ---- processes ----------------------------------------------------------------------------

const table = new ProcessTable($("ptable"), {
  onSelect: (pid) => {
    state.selectedPid = pid;
    $("detail").hidden = false;
    $("detail-title").textContent = `pid ${pid}`;
    $("detail-note").textContent = "loading…";
    refreshDetail().catch(() => {});
  },
  onView: ({ shown, total, context, kernelHidden }) => {
    // Says what the table leaves out: "12 of 102 shown, 54 kernel threads hidden".
    const plural = (n, one, many) => `${fmt.count(n)} ${n === 1 ? one : many}`;
    let text = shown === total ? "" : `${fmt.count(shown)} of ${fmt.count(total)} shown`;
    if (context > 0) text += ` under ${plural(context, "parent", "parents")}`;
    if (kernelHidden > 0) text += `, ${plural(kernelHidden, "kernel thread", "kernel threads")} hidden`;
    $("proc-shown").textContent = text;
  },
});

/** Why a process shown without PSS waits, when the PSS worker rests after a read to keep to its
 * budget: a big read at a small budget rests minutes, and the process is read after it. Rests
 * under a second are left unsaid. */
function pssRestText(a) {
  const w = a?.pss_worker;
  if (!restShown(w)) return "";
  return ` The worker is resting ${fmt.duration(w.resting_seconds)} more to keep to its budget (${budgetText(w)} of one CPU); then the processes shown are read first.`;
}

/** Whether the PSS worker's rest is worth saying: a second or more (shorter ones would flicker). */
function restShown(w) {
  return w?.resting_seconds >= 1;
}

/** The PSS worker's budget as a percent of one CPU, small ones to their first digits (0.01 %). */
function budgetText(w) {
  return `${fmt.num(100 * (w.budget_share_of_one_cpu ?? 0), 3)} %`;
}

function renderDetail(p, gone) {
  if (!p) {
    $("detail-note").textContent = gone;
    return;
  }
  $("detail-title").textContent = `${p.name} (${p.pid})`;
  const pssKnown = p.pss_age_secs !== null;
  // Why PSS is not read, when proctor knows: capped, or refused by the kernel.
  const why = p.pss_note ? ` PSS ${p.pss_note}.` : "";
  const age = fmt.duration(p.pss_age_secs);
  $("detail-note").textContent = !pssKnown
    ? p.pss_note
      ? `PSS and USS ${p.pss_note}.`
      : "PSS and USS not read yet: the budgeted smaps_rollup worker has not reached this process." +
        pssRestText(state.lastSnapshot?.agent)
    : p.pss_estimated_from != null
      ? // A clone's reading standing in for this process's own until it is read itself.
        `PSS and USS of its clone ${p.pss_estimated_from} (same parent and name, resident size and faults within 16 pages), read ${age} ago ` +
        `by the budgeted smaps_rollup worker: they stand in until this process is read itself.${why}`
      : `PSS and USS read ${age} ago by the budgeted smaps_rollup worker.${why}`;
  const started = p.start_time_unix_secs !== null ? new Date(p.start_time_unix_secs * 1000).toLocaleString() : fmt.DASH;
  facts($("detail-facts"), [
    ["PSS", approx(p, fmt.bytes(p.pss_bytes))],
    ["USS", approx(p, fmt.bytes(p.uss_bytes))],
    ["PSS age", pssKnown ? fmt.duration(p.pss_age_secs) : p.pss_note ? "not read" : "not read yet"],
    ["held by proctor", stallText(p)],
    ["swap PSS", approx(p, fmt.bytes(p.swap_pss_bytes))],
    ["RSS", `${fmt.bytes(p.rss_bytes)} (anon ${fmt.bytes(p.anon_bytes)}, file ${fmt.bytes(p.file_bytes)}, shmem ${fmt.bytes(p.shmem_bytes)})`],
    ["swap", fmt.bytes(p.swap_bytes)],
    ["virtual", fmt.bytes(p.vsize_bytes)],
    ["CPU", `${fmt.percent(p.cpu_percent)} of one CPU, ${fmt.percent(p.cpu_percent_of_effective)} of effective`],
    ["CPU time", fmt.duration(p.cpu_seconds_total)],
    ["state", p.state],
    ["parent", String(p.ppid)],
    ["uid", p.uid === null ? fmt.DASH : String(p.uid)],
    ["threads", String(p.threads)],
    ["started", started],
    ["I/O", `read ${fmt.bytesPerSec(p.read_bytes_per_sec)}, write ${fmt.bytesPerSec(p.write_bytes_per_sec)}`],
    ["major faults", `${fmt.num(p.major_faults_per_sec, 1)}/s`],
    ...(p.net_rx_bytes_per_sec === null || p.net_rx_bytes_per_sec === undefined
      ? []
      : [
          ["network", `received ${fmt.bytesPerSec(p.net_rx_bytes_per_sec)}, sent ${fmt.bytesPerSec(p.net_tx_bytes_per_sec)} (IP bytes)`],
          [
            "TCP",
            `${fmt.count(p.net_connections)} connections, ${fmt.num(p.net_connects_per_sec, 1)} connects/s, ` +
              `${fmt.num(p.net_retransmits_per_sec, 1)} retransmits/s, RTT ${fmt.duration(p.net_rtt_seconds)} (max ${fmt.duration(p.net_rtt_max_seconds)})`,
          ],
        ]),
    ["cgroup", p.cgroup ?? fmt.DASH],
  ]);
  renderSharing(p);
  // Each argument on its own line: spaces inside an argument stay visible as such.
  $("detail-cmdline").textContent = p.cmdline === null ? "(not read yet)" : p.cmdline.length ? p.cmdline.join("\n") : "(none: kernel thread or zombie)";
}

/** The stall ledger of one process in words: how long proctor's reads held its mmap lock, the
 * longest hold, and what its own threads waited on them where the kernel's trace says. */
function stallText(p) {
  if (p.stall_by_proctor_seconds_total == null) return "its mmap lock: not taken by proctor yet";
  const waited = p.stall_target_waited_seconds_total == null ? "" : `; its threads waited ${fmt.duration(p.stall_target_waited_seconds_total)} on them`;
  return `its mmap lock ${fmt.duration(p.stall_by_proctor_seconds_total)} in all, longest ${fmt.duration(p.stall_by_proctor_max_seconds)}${waited}`;
}

/** A family head (several children of one name: gunicorn, uwsgi, PHP-FPM, Postgres) gets what
 * the family shares, from the agent's PSS readings: the sum of RSS against the sum of PSS.
 * Names are the processes' own: textContent only. */
function renderSharing(p) {
  const s = p.sharing;
  $("detail-sharing").hidden = !s;
  if (!s) return;
  const who = `${s.members} processes (this one and ${s.workers} ${s.worker_name} workers)`;
  let text;
  if (s.members_read === 0) {
    text = `${who}: not read yet by the budgeted smaps_rollup worker.`;
  } else {
    const coverage = s.members_read < s.members ? ` PSS known for ${s.members_read} of ${s.members}: the sums are over those.` : "";
    const clones = s.members_estimated ? ` ${s.members_estimated} of them not read themselves yet: a clone's reading stands in.` : "";
    text =
      `${who} use ${fmt.bytes(s.pss_sum_bytes)}; unshared they would use ${fmt.bytes(s.rss_sum_bytes)}: ` +
      `sharing saves ${fmt.bytes(s.saving_bytes)}, ${fmt.percent(s.saving_percent)}.${coverage}${clones} ` +
      `Oldest reading ${fmt.duration(s.oldest_reading_age_secs)} ago. ` +
      `proctor share ${p.pid} --watch 10s shows which worker copies, and how fast.`;
  }
  $("detail-sharing-text").textContent = text;
}

$("detail-close").addEventListener("click", () => {
  state.selectedPid = null;
  table.selected = null;
  table.schedule();
  $("detail").hidden = true;
});

let filterTimer = null;
$("filter").addEventListener("input", (e) => {
  // Filtering is local, but a short debounce keeps typing smooth with thousands of rows.
  clearTimeout(filterTimer);
  filterTimer = setTimeout(() => table.setFilter(e.target.value), 60);
});
$("tree").addEventListener("change", (e) => table.setTree(e.target.checked));
$("kernel").addEventListener("change", (e) => table.setKernelThreads(e.target.checked));
$("pause").addEventListener("change", (e) => {
  state.paused = e.target.checked;
  setStatus(state.paused ? "paused" : "live", state.paused ? "paused" : "resuming…");
});
$("groups-range").addEventListener("change", (e) => loadGroups(Number(e.target.value)));
document.addEventListener("visibilitychange", () => {
  if (!document.hidden && !state.stopped) restart();
});

// Start on the window the markup presses: the charts and the range's top processes follow it.
setRange(Number(document.querySelector('[data-range-ms][aria-pressed="true"]')?.dataset.rangeMs ?? 300000));
loadGroups(Number($("groups-range").value));
