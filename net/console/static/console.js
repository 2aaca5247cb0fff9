// The sweepq console's page: it draws what the server pushes on /api/events (one snapshot
// per tick, the history once), browses through /api/queues/Q/messages, and sends actions
// with the admin token in the Authorization header. The server decides what is allowed:
// hiding the admin controls here is for the eye only (net/console/app.py refuses anyway).
"use strict";

const MAX_POINTS = 1200;
const el = (id) => document.getElementById(id);
const state = {
  admin: sessionStorage.getItem("sweepq-admin") || "",
  snap: null,
  times: [], depths: {}, swept: [], unswept: [], lastPoint: null,
  depthChart: null, sweepChart: null, chartQueues: "",
  browsing: null,
};
// For tests and the latency benchmark: when each snapshot reached the page and what it showed.
window.sweepqApplied = [];

function num(n) { return n === undefined || n === null ? "–" : Number(n).toLocaleString("en-US"); }
function bytes(n) {
  if (n === undefined || n === null) return "–";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0; let v = n;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return (i ? v.toFixed(1) : v) + " " + units[i];
}
function age(seconds) {
  const s = Math.floor(seconds);
  return s >= 3600 ? `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`
    : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}
function cell(tr, cls, text) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text;
  tr.appendChild(td);
  return td;
}
function notice(text, bad) {
  const n = el("notice");
  n.textContent = text;
  n.className = bad ? "bad" : "good";
}

// -- actions (the server checks the admin token on every one) ---------------------------------

async function act(method, path, body) {
  const headers = {"Content-Type": "application/json"};
  if (state.admin) headers["Authorization"] = "Bearer " + state.admin;
  const resp = await fetch(path, {method, headers, body: body ? JSON.stringify(body) : undefined});
  let doc = {};
  try { doc = await resp.json(); } catch (e) { doc = {error: resp.statusText}; }
  if (!resp.ok) {
    notice(`refused: ${doc.error || resp.statusText}`, true);
    return null;
  }
  return doc;
}

async function unlock(token) {
  const resp = await fetch("/api/whoami", {headers: {"Authorization": "Bearer " + token}});
  const doc = resp.ok ? await resp.json() : {admin: false};
  if (doc.admin) {
    state.admin = token;
    sessionStorage.setItem("sweepq-admin", token);
  } else {
    state.admin = "";
    sessionStorage.removeItem("sweepq-admin");
    if (token) notice("that is not this server's admin token: the console stays read-only", true);
  }
  document.body.classList.toggle("admin", !!state.admin);
  el("mode").textContent = state.admin ? "admin" : "read-only";
  el("mode").className = state.admin ? "admin-mode" : "readonly";
}

el("admin-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  unlock(el("admin-token").value.trim());
  el("admin-token").value = "";
});
el("lock").addEventListener("click", () => unlock(""));

el("define-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const attributes = {memory_policy: el("define-policy").value};
  if (el("define-max-depth").value) attributes.max_depth = Number(el("define-max-depth").value);
  if (el("define-persistent").checked) attributes.default_persistence = 1;
  const name = el("define-name").value.trim();
  const done = await act("POST", "/api/queues", {name, attributes});
  if (done) { notice(`defined queue ${name}`); el("define-name").value = ""; }
});

async function clearQueue(name) {
  const done = await act("POST", `/api/queues/${encodeURIComponent(name)}/clear`);
  if (done) notice(`cleared ${num(done.result)} message(s) from ${name}`);
}
async function deleteQueue(name) {
  if (!window.confirm(`Delete queue ${name} and every message on it?`)) return;
  const done = await act("DELETE", `/api/queues/${encodeURIComponent(name)}?purge=true`);
  if (done) notice(`deleted queue ${name}`);
}
async function channelAction(name, action) {
  const done = await act("POST", `/api/channels/${encodeURIComponent(name)}/${action}`);
  if (done) notice(`channel ${name}: ${action} — now ${done.result.status}`);
}

// -- browsing ------------------------------------------------------------------------------------

function dump(hex) {
  const lines = [];
  for (let off = 0; off < hex.length; off += 32) {
    const chunk = hex.slice(off, off + 32);
    const groups = chunk.match(/.{1,4}/g).join(" ").toUpperCase();
    let text = "";
    for (let i = 0; i < chunk.length; i += 2) {
      const b = parseInt(chunk.slice(i, i + 2), 16);
      text += b >= 32 && b < 127 ? String.fromCharCode(b) : ".";
    }
    lines.push(`${(off / 2).toString(16).toUpperCase().padStart(8, "0")}:  ${groups.padEnd(39)}  '${text}'`);
  }
  return lines.join("\n");
}

function showMessages() {
  const body = el("message-table").tBodies[0];
  body.textContent = "";
  const doc = state.browsing && state.browsing.doc;
  if (!doc) return;
  const asHex = document.querySelector("input[name=payload]:checked").value === "hex";
  doc.messages.forEach((m, i) => {
    const tr = body.insertRow();
    tr.className = "message";
    cell(tr, "n", i + 1);
    cell(tr, "id", m.msg_id).title = "MsgId";
    cell(tr, "id", m.correl_id.replace(/^(00)+$/, "–")).title = "CorrelId (– : none)";
    cell(tr, "n", m.priority);
    cell(tr, "", m.persistence === "PERSISTENT" ? "yes" : "no");
    cell(tr, "n", m.backout_count);
    cell(tr, "", m.put_time);
    cell(tr, "n", m.expiry < 0 ? "unlimited" : m.expiry);
    cell(tr, "n", num(m.data_length));
    const extra = [];
    if (m.group_id) extra.push(`group ${m.group_id} #${m.msg_seq_number} offset ${m.offset}`);
    for (const [k, v] of Object.entries(m.properties || {})) extra.push(`${k} = ${JSON.stringify(v)}`);
    cell(tr, "more", extra.join("; ") || "–");
    const td = cell(tr, "payload-cell", "");
    const pre = document.createElement("pre");
    pre.className = "payload";
    pre.textContent = asHex || m.data === null ? dump(m.data_hex) : m.data;
    if (!asHex && m.data === null) pre.title = "not UTF-8: shown as hex";
    if (m.truncated) pre.textContent += `\n… first ${num(m.data_hex.length / 2)} of ${num(m.data_length)} bytes`;
    td.appendChild(pre);
  });
}

async function browse(name) {
  el("browse").hidden = false;
  el("browse-queue").textContent = name;
  const count = Number(el("browse-count").value) || 20;
  const resp = await fetch(`/api/queues/${encodeURIComponent(name)}/messages?count=${count}&max_bytes=4096`);
  const doc = await resp.json();
  if (!resp.ok) { notice(`browse: ${doc.error}`, true); return; }
  state.browsing = {name, doc};
  el("browse-said").textContent =
    `${doc.messages.length} message(s) shown, in delivery order; browsing removed none.`;
  showMessages();
}
document.querySelectorAll("input[name=payload]").forEach((r) => r.addEventListener("change", showMessages));
el("browse-again").addEventListener("click", () => state.browsing && browse(state.browsing.name));
el("browse-close").addEventListener("click", () => { el("browse").hidden = true; state.browsing = null; });

// -- tables -----------------------------------------------------------------------------------

function button(text, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button"; b.textContent = text; b.className = cls; b.addEventListener("click", onClick);
  return b;
}

// What each rule of the sweeper (sweeper/policy.py RULES) does, beside its name.
const RULE_SAYS = {
  seed: "the rule above, as given",
  adaptive: "the rule above, made not to sweep again a queue that drains a little slower than it fills",
};

const QUEUE_CELLS = ["depth", "in-memory", "swept", "mem-bytes", "blob-bytes", "x", "y", "threshold", "buffer",
  "decision", "policy"];

function queueRow(name) {
  let tr = document.querySelector(`#queue-table tr[data-queue="${CSS.escape(name)}"]`);
  if (tr) return tr;
  tr = document.createElement("tr");
  tr.dataset.queue = name;
  cell(tr, "name", name);
  for (const c of QUEUE_CELLS) cell(tr, c + (c === "decision" || c === "policy" ? "" : " n"), "");
  const td = cell(tr, "do", "");
  td.append(button("browse", "browse", () => browse(name)),
    button("clear", "admin clear", () => clearQueue(name)),
    button("delete", "admin delete", () => deleteQueue(name)));
  el("queue-table").tBodies[0].appendChild(tr);
  return tr;
}

function renderQueues(snap) {
  const seen = new Set();
  for (const q of snap.queues) {
    seen.add(q.name);
    const tr = queueRow(q.name);
    const set = (c, v) => { tr.querySelector("." + c).textContent = v; };
    const r = q.rule;
    set("depth", num(q.depth));
    set("in-memory", num(q.in_memory));
    set("swept", num(q.swept));
    set("mem-bytes", bytes(q.mem_bytes));
    set("blob-bytes", q.blobs ? `${bytes(q.blob_bytes)} (${num(q.blobs)} blobs)` : bytes(q.blob_bytes || 0));
    set("x", r ? `${num(r.x)} (now ${num(q.x_now)})` : `– (now ${num(q.x_now)})`);
    set("y", r ? num(r.y) : "–");
    set("threshold", r ? num(r.threshold) : "–");
    set("buffer", r ? num(r.buffer) : "–");
    // The last cycle's decision alone: the swept column counts what earlier cycles moved.
    set("decision", r ? `last cycle: ${r.says}` : "no cycle yet");
    tr.querySelector(".decision").dataset.outcome = r ? r.outcome : "";
    set("policy", q.memory_policy);
  }
  for (const tr of document.querySelectorAll("#queue-table tbody tr")) {
    if (!seen.has(tr.dataset.queue)) tr.remove();
  }
}

function renderBudget(b) {
  el("budget-acting").textContent = b.acting;
  const dl = el("budget-figures");
  dl.textContent = "";
  const rows = [["budget", b.budget ? bytes(b.budget) : "none"], ["counted", bytes(b.total)],
    ["of which messages", bytes(b.messages)], ["of which the store", bytes(b.store)],
    ["resident memory (RSS)", bytes(b.rss)]];
  if (b.budget) {
    rows.push(["high mark (sweep beyond the rule)", bytes(b.high)], ["low mark", bytes(b.low)],
      ["paging from", bytes(b.page_at)], ["pressure", `${Math.round(100 * b.pressure)} %`]);
    for (const [k, v] of Object.entries(b.events)) rows.push([k.replace("_", " "), num(v)]);
  }
  rows.push(["queues by policy", Object.entries(b.policies).map(([k, v]) => `${k} ${v}`).join(", ") || "–"]);
  for (const [k, v] of rows) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    dl.append(dt, dd);
  }
  el("budget-counts").textContent = b.counts;
  const fill = b.budget ? Math.min(1, b.total / b.budget) : 0;
  el("budget-fill").style.width = `${(100 * fill).toFixed(1)}%`;
  el("budget-fill").className = b.over ? "over" : b.paging ? "paging" : "";
  el("budget-bar").hidden = !b.budget;
}

function renderChannels(rows) {
  const body = el("channel-table").tBodies[0];
  body.textContent = "";
  if (!rows.length) {
    const tr = body.insertRow(); const td = cell(tr, "hint", "no channel defined"); td.colSpan = 9;
  }
  for (const c of rows) {
    const tr = body.insertRow();
    tr.dataset.channel = c.name;
    cell(tr, "name", c.name); cell(tr, "", c.type); cell(tr, "status", c.status);
    cell(tr, "n", num(c.seq));
    cell(tr, "indoubt", c.indoubt ? `yes: ${num(c.indoubt_messages)} message(s) up to ${num(c.indoubt_seq)}` : "no");
    cell(tr, "", c.xmit_queue || "–"); cell(tr, "n xmit-depth", num(c.xmit_depth));
    cell(tr, "", c.partner || c.conname || "–");
    const td = cell(tr, "do", "");
    td.append(button("start", "admin start", () => channelAction(c.name, "start")),
      button("stop", "admin stop", () => channelAction(c.name, "stop")));
  }
}

function renderConnections(snap) {
  const body = el("connection-table").tBodies[0];
  body.textContent = "";
  if (!snap.connections.length) {
    const tr = body.insertRow(); const td = cell(tr, "hint", "no client connected"); td.colSpan = 8;
  }
  for (const c of snap.connections) {
    const tr = body.insertRow();
    cell(tr, "", `#${c.id}`); cell(tr, "", `${c.transport} ${c.peer}`); cell(tr, "n", c.pid);
    cell(tr, "", c.client || "–"); cell(tr, "n", num(c.handles)); cell(tr, "n", num(c.uncommitted));
    cell(tr, "n", num(c.calls)); cell(tr, "", c.state);
  }
  el("refused").textContent = snap.refused ? `(${num(snap.refused)} refused at the limit)` : "";
}

// -- charts -----------------------------------------------------------------------------------

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"];

function addPoint(p) {
  const last = state.lastPoint;
  state.times.push(p.t);
  for (const name of Object.keys(p.depth)) {
    if (!state.depths[name]) state.depths[name] = new Array(state.times.length - 1).fill(null);
  }
  for (const name of Object.keys(state.depths)) state.depths[name].push(p.depth[name] ?? null);
  const dt = last ? Math.max(1e-3, p.t - last.t) : 1;
  state.swept.push(last ? Math.max(0, (p.swept - last.swept) / dt) : 0);
  state.unswept.push(last ? Math.max(0, (p.unswept - last.unswept) / dt) : 0);
  state.lastPoint = p;
  if (state.times.length > MAX_POINTS) {
    state.times.shift(); state.swept.shift(); state.unswept.shift();
    for (const name of Object.keys(state.depths)) state.depths[name].shift();
  }
}

function chartWidth(id) { return Math.max(300, el(id).clientWidth || 600); }

function drawCharts() {
  if (typeof uPlot === "undefined") return;
  const names = Object.keys(state.depths).sort();
  const key = names.join("\u0000");
  if (key !== state.chartQueues || !state.depthChart) {
    if (state.depthChart) state.depthChart.destroy();
    el("depth-chart").textContent = "";
    state.depthChart = new uPlot({
      width: chartWidth("depth-chart"), height: 220,
      series: [{}, ...names.map((n, i) => ({label: n, stroke: COLORS[i % COLORS.length], width: 1.5}))],
      axes: [{}, {size: 70}],
    }, [state.times, ...names.map((n) => state.depths[n])], el("depth-chart"));
    state.chartQueues = key;
  } else {
    state.depthChart.setData([state.times, ...names.map((n) => state.depths[n])]);
  }
  if (!state.sweepChart) {
    state.sweepChart = new uPlot({
      width: chartWidth("sweep-chart"), height: 220,
      series: [{}, {label: "swept", stroke: "#d62728", width: 1.5}, {label: "unswept", stroke: "#2ca02c", width: 1.5}],
      axes: [{}, {size: 70}],
    }, [state.times, state.swept, state.unswept], el("sweep-chart"));
  } else {
    state.sweepChart.setData([state.times, state.swept, state.unswept]);
  }
}

// -- the stream -------------------------------------------------------------------------------

function render(snap) {
  state.snap = snap;
  el("qm-name").textContent = snap.qm;
  el("where").textContent = snap.urls.join(" · ");
  el("uptime").textContent = "up " + age(snap.at - snap.started);
  el("pages").textContent = `${snap.pages} page(s) open`;
  document.querySelectorAll(".factor").forEach((s) => { s.textContent = snap.policy.factor; });
  document.querySelectorAll(".extra").forEach((s) => { s.textContent = snap.policy.extra; });
  el("interval").textContent = snap.policy.interval;
  el("rule-name").textContent = snap.policy.rule;
  el("cycles").textContent = num(snap.sweeper.cycles);
  el("rule-says").textContent = RULE_SAYS[snap.policy.rule] || "";
  renderQueues(snap);
  renderBudget(snap.budget);
  renderChannels(snap.channels);
  renderConnections(snap);
  addPoint({t: snap.at, depth: Object.fromEntries(snap.queues.map((q) => [q.name, q.depth])),
    swept: snap.totals.msgs_swept, unswept: snap.totals.msgs_unswept});
  drawCharts();
  window.sweepqApplied.push({at: Date.now(), snapAt: snap.at,
    depths: Object.fromEntries(snap.queues.map((q) => [q.name, q.depth]))});
  if (window.sweepqApplied.length > 2000) window.sweepqApplied.splice(0, 1000);
}

function connect() {
  const events = new EventSource("/api/events");
  events.addEventListener("open", () => { el("live").textContent = "live"; el("live").className = "on"; });
  events.addEventListener("error", () => { el("live").textContent = "reconnecting"; el("live").className = "off"; });
  events.addEventListener("history", (ev) => {
    state.times = []; state.depths = {}; state.swept = []; state.unswept = []; state.lastPoint = null;
    for (const p of JSON.parse(ev.data)) addPoint(p);
  });
  events.addEventListener("snapshot", (ev) => render(JSON.parse(ev.data)));
}

unlock(state.admin);
connect();
