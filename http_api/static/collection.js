// The live page of one collection: polls GET <collection> every few seconds while it runs, stops when it ends.
(() => {
  const { withCode, call, el, setText, linkOrText, number, when, duration, TERMINAL } = LIVE;
  const base = location.pathname.replace(/\/view\/?$/, "");
  const collectionsPath = base.replace(/\/[^/]*$/, "");
  const collectionId = decodeURIComponent(base.slice(collectionsPath.length + 1));

  const ORDER = "drbsfip";
  const NAMES = { d: "done", r: "running", b: "waiting for budget", s: "split", f: "failed", i: "incomplete",
    p: "pending" };
  const style = getComputedStyle(document.documentElement);
  const COLOR = {};
  for (const [letter, name] of Object.entries({ d: "done", r: "running", b: "budget", s: "split", f: "failed",
    i: "incomplete", p: "pending" })) COLOR[letter] = style.getPropertyValue("--" + name).trim();

  const canvas = document.getElementById("grid");
  const box = document.getElementById("gridbox");
  const tip = document.getElementById("tip");
  const stats = { renders: 0, firstMs: 0, lastMs: 0, maxMs: 0, totalMs: 0 };  // script time per refresh
  window.liveStats = stats;

  let summary = null;
  let layout = null;        // {size, cols, rows, width, dpr}
  let codes = new Uint8Array(0);
  let partsOf = {};
  let partKeys = {};
  let cells = null;         // {count, origin (ms), end (s), interval (s) | starts/ends}
  let windowsKey = "";
  let failuresByCell = new Map();
  let lanesByCell = new Map();
  let focus = -1;
  let ended = false;
  const samples = [];

  document.getElementById("cid").textContent = collectionId;
  document.title = "Collection " + collectionId;
  document.getElementById("all-link").href = withCode(collectionsPath + "/view");

  // --- cells: window arithmetic ------------------------------------------------------------------------------
  function describeCells(grid) {
    const key = JSON.stringify([grid.cells, grid.origin, grid.end, grid.intervalSeconds, grid.windows]);
    if (key === windowsKey) return;
    windowsKey = key;
    cells = { count: grid.cells, origin: Date.parse(grid.origin), end: grid.end, interval: grid.intervalSeconds };
    if (!grid.intervalSeconds) {
      const starts = new Float64Array(grid.cells);
      const ends = new Float64Array(grid.cells);
      let i = 0;
      for (const [start, length, count] of grid.windows || []) {
        for (let k = 0; k < count && i < grid.cells; k += 1, i += 1) {
          starts[i] = start + k * length;
          ends[i] = starts[i] + length;
        }
      }
      cells.starts = starts;
      cells.ends = ends;
    }
  }

  function bounds(i) {
    if (cells.interval) return [i * cells.interval, Math.min((i + 1) * cells.interval, cells.end)];
    return [cells.starts[i], cells.ends[i]];
  }

  function cellAt(offset) {
    if (cells.interval) return Math.min(cells.count - 1, Math.max(0, Math.floor(offset / cells.interval)));
    let lo = 0;
    let hi = cells.count - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (cells.starts[mid] <= offset) lo = mid; else hi = mid - 1;
    }
    return lo;
  }

  const stamp = (offset) => when(cells.origin + offset * 1000);
  const span = (window) => String(window).split("/").map(when).join(" \u2192 ");

  // --- drawing ---------------------------------------------------------------------------------------------------
  function drawCell(ctx, x, y, s, letter, parts, length) {
    const inner = Math.max(1, s - (s >= 8 ? 2 : 1));
    ctx.clearRect(x, y, s, s);
    if (letter === "s" && parts) {
      for (const [a, b, part] of parts) {
        const x0 = x + Math.round((a / length) * inner);
        const x1 = x + Math.round((b / length) * inner);
        ctx.fillStyle = COLOR[part] || COLOR.r;
        ctx.fillRect(x0, y, Math.max(1, x1 - x0), inner);
        if (a > 0) { ctx.fillStyle = "#ffffff"; ctx.fillRect(x0, y, 1, inner); }
      }
      ctx.fillStyle = "#1b1f24";  // shape cue: a folded top-right corner
      ctx.beginPath(); ctx.moveTo(x + inner, y); ctx.lineTo(x + inner - Math.max(3, inner / 3), y);
      ctx.lineTo(x + inner, y + Math.max(3, inner / 3)); ctx.fill();
      return;
    }
    ctx.fillStyle = COLOR[letter] || COLOR.r;
    ctx.fillRect(x, y, inner, inner);
    const c = inner / 2;
    ctx.strokeStyle = ctx.fillStyle = "#ffffff";
    ctx.lineWidth = Math.max(1, inner / 7);
    if (letter === "r") {
      ctx.beginPath(); ctx.arc(x + c, y + c, Math.max(1, inner * 0.2), 0, 2 * Math.PI); ctx.fill();
    } else if (letter === "b") {
      ctx.fillRect(x + inner * 0.2, y + c - Math.max(0.5, inner * 0.08), inner * 0.6, Math.max(1, inner * 0.16));
    } else if (letter === "f" || letter === "i") {
      const m = inner * 0.22;
      ctx.beginPath(); ctx.moveTo(x + m, y + inner - m); ctx.lineTo(x + inner - m, y + m);
      if (letter === "f") { ctx.moveTo(x + m, y + m); ctx.lineTo(x + inner - m, y + inner - m); }
      ctx.stroke();
    } else if (letter === "p") {
      ctx.strokeStyle = "#9aa3ad"; ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, y + 0.5, inner - 1, inner - 1);
    }
  }

  function position(i) {
    return [(i % layout.cols) * layout.size, Math.floor(i / layout.cols) * layout.size];
  }

  function paint(ctx, i) {
    const [x, y] = position(i);
    const letter = ORDER[codes[i]];
    const [a, b] = bounds(i);
    drawCell(ctx, x, y, layout.size, letter, partsOf[i], b - a);
    if (i === focus) {
      ctx.strokeStyle = "#1b1f24"; ctx.lineWidth = 2;
      ctx.strokeRect(x + 1, y + 1, layout.size - 3, layout.size - 3);
    }
  }

  function makeLayout(count) {
    const width = Math.max(240, Math.floor(box.clientWidth));
    let size = 6;
    for (const s of [24, 18, 14, 12, 10, 8, 6]) {
      if (Math.ceil(count / Math.floor(width / s)) * s <= 900) { size = s; break; }
    }
    const cols = Math.max(1, Math.floor(width / size));
    const rows = Math.max(1, Math.ceil(count / cols));
    const dpr = window.devicePixelRatio || 1;
    canvas.style.width = cols * size + "px";
    canvas.style.height = rows * size + "px";
    canvas.width = Math.round(cols * size * dpr);
    canvas.height = Math.round(rows * size * dpr);
    canvas.dataset.cellSize = String(size);
    canvas.dataset.cols = String(cols);
    return { size, cols, rows, width, dpr, count };
  }

  function renderGrid(grid, full) {
    const count = grid.cells;
    const next = new Uint8Array(count);
    let i = 0;
    const runs = /([a-z])(\d+)/g;
    let match;
    while ((match = runs.exec(grid.states)) !== null) {
      const code = Math.max(0, ORDER.indexOf(match[1]));
      const end = Math.min(count, i + Number(match[2]));
      next.fill(code, i, end);
      i = end;
    }
    if (i < count) next.fill(ORDER.indexOf("p"), i, count);
    const nextParts = {};
    const nextKeys = {};
    for (const [cell, parts] of Object.entries(grid.parts || {})) {
      nextParts[cell] = parts;
      nextKeys[cell] = JSON.stringify(parts);
    }
    if (!layout || layout.count !== count || full) {
      layout = makeLayout(count);
      full = true;
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(layout.dpr, 0, 0, layout.dpr, 0, 0);
    const old = codes;
    const oldKeys = partKeys;
    codes = next;
    partsOf = nextParts;
    partKeys = nextKeys;
    for (let k = 0; k < count; k += 1) {
      if (full || next[k] !== old[k] || (nextKeys[k] || oldKeys[k]) && nextKeys[k] !== oldKeys[k]) paint(ctx, k);
    }
    canvas.dataset.cells = String(count);
    canvas.dataset.states = grid.states;
    canvas.setAttribute("aria-label", "Chunk grid: " + legendText(grid.counts || {}));
  }

  function legendText(counts) {
    return ORDER.split("").filter((l) => counts[l]).map((l) => NAMES[l] + " " + number(counts[l])).join(", ");
  }

  function renderLegend(counts) {
    const list = document.getElementById("legend");
    if (!list.childElementCount) {
      for (const letter of ORDER) {
        const item = el("li");
        item.dataset.state = letter;
        const swatch = el("canvas");
        swatch.width = swatch.height = 14;
        const ctx = swatch.getContext("2d");
        drawCell(ctx, 0, 0, 14, letter, letter === "s" ? [[0, 1, "d"], [1, 2, "r"]] : null, 2);
        item.append(swatch, el("span", NAMES[letter]), el("span", "", "count muted"));
        list.append(item);
      }
    }
    for (const item of list.children) {
      item.querySelector(".count").textContent = number(counts[item.dataset.state] || 0);
    }
  }

  // --- details of one cell -------------------------------------------------------------------------------------
  function details(i) {
    const [a, b] = bounds(i);
    const letter = ORDER[codes[i]];
    const lines = ["Chunk " + number(i + 1) + " of " + number(cells.count), stamp(a) + " \u2192 " + stamp(b),
      "State: " + (ended && letter === "p" ? "never started" : NAMES[letter])];
    for (const lane of lanesByCell.get(i) || []) {
      lines.push((lane.state === "b" ? "Waiting for budget" : "Running") + ": " + stamp(lane.start) + " \u2192 "
        + stamp(lane.end) + ", phase " + lane.phase + ", attempt " + lane.attempts);
    }
    for (const f of failuresByCell.get(i) || []) {
      lines.push("Failed " + span(f.window) + " after " + (f.attempts ?? "?") + " attempt(s): "
        + f.kind + ": " + f.reason);
    }
    if (partsOf[i]) {
      lines.push("Split: " + partsOf[i].map(([s, e, p]) => stamp(a + s).slice(11, 19) + "\u2013"
        + stamp(a + e).slice(11, 19) + " " + NAMES[p]).join("; "));
    }
    return lines.join("\n");
  }

  function indexFromPointer(event) {
    const rect = canvas.getBoundingClientRect();
    const col = Math.floor((event.clientX - rect.left) / layout.size);
    const row = Math.floor((event.clientY - rect.top) / layout.size);
    const i = row * layout.cols + col;
    return col >= 0 && col < layout.cols && i >= 0 && i < cells.count ? i : -1;
  }

  canvas.addEventListener("mousemove", (event) => {
    if (!layout || !cells) return;
    const i = indexFromPointer(event);
    if (i < 0) { tip.hidden = true; return; }
    tip.textContent = details(i);
    tip.hidden = false;
    const [x, y] = position(i);
    tip.style.left = Math.min(x + layout.size + 8, Math.max(0, box.clientWidth - 320)) + "px";
    tip.style.top = y + layout.size + 8 + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });

  function moveFocus(next) {
    if (!cells || !cells.count) return;
    const previous = focus;
    focus = Math.min(cells.count - 1, Math.max(0, next));
    const ctx = canvas.getContext("2d");
    if (previous >= 0 && previous < cells.count) paint(ctx, previous);
    paint(ctx, focus);
    setText("cell-info", details(focus));
  }

  canvas.addEventListener("focus", () => { if (focus < 0) moveFocus(0); });
  canvas.addEventListener("keydown", (event) => {
    if (!layout) return;
    const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: layout.cols, ArrowUp: -layout.cols }[event.key];
    if (step) moveFocus(Math.max(0, focus) + step);
    else if (event.key === "Home") moveFocus(0);
    else if (event.key === "End") moveFocus(cells.count - 1);
    else return;
    event.preventDefault();
  });
  window.addEventListener("resize", () => { if (summary && summary.grid && summary.grid.known) renderGrid(summary.grid, true); });

  // --- the other panels ----------------------------------------------------------------------------------------
  function renderHeader(s, serverNow) {
    const c = s.collection || {};
    const status = document.getElementById("f-status");
    const quota = !ended && s.budget && s.budget.quota && s.budget.quota.waitingUntil;
    status.textContent = s.status + (s.status !== s.runtimeStatus ? " (" + s.runtimeStatus + ")" : "")
      + (s.settling ? " \u00b7 settling until " + when(s.settling.until) : "")
      + (quota ? " \u00b7 waiting for the tenant's daily Graph quota until " + when(quota) : "");
    status.className = "status-" + String(s.status).replace(/[^A-Za-z]/g, "");
    setText("f-tenant", c.tenantId || "\u2014");
    setText("f-range", when(c.startDate) + " \u2192 " + when(c.endDate));
    const chunk = c.intervalMinutes ? c.intervalMinutes + " min" : (c.windows ? c.windows + " windows" : "\u2014");
    setText("f-source", [c.source, "K=" + c.maxConcurrency, chunk].join(" \u00b7 "));
    setText("f-started", when(c.startedAt));
    const started = Date.parse(c.startedAt || s.createdTime);
    const finished = ended ? Date.parse(s.lastUpdatedTime) : serverNow;
    const elapsed = finished - started;
    setText("f-elapsed", duration(elapsed));
    const p = s.progress || {};
    const percent = Number(p.percent || 0);
    if (ended) {
      setText("f-eta-label", "Finished");
      setText("f-eta", when(s.lastUpdatedTime));
    } else {
      setText("f-eta", percent > 0 && percent < 100 ? "about " + duration((elapsed * (100 - percent)) / percent)
        : "\u2014");
    }
    setText("f-chunks", number((p.completed || 0) + (p.failed || 0)) + " / " + number(p.total) + " finished \u00b7 "
      + number(p.failed || 0) + " failed \u00b7 " + number(p.inFlight || 0) + " in flight \u00b7 "
      + number(p.splits || 0) + (p.splits === 1 ? " split" : " splits"));
    setText("f-records", number(s.records));
    document.getElementById("bar-fill").style.width = Math.min(100, percent) + "%";
    setText("bar-text", percent.toFixed(1) + " %");
    document.getElementById("bar").setAttribute("aria-valuenow", String(percent));
    const parentRow = document.getElementById("f-parent-row");
    if (s.parentCollectionId && parentRow.hidden) {
      const link = el("a", s.parentCollectionId);
      link.href = withCode(collectionsPath + "/" + encodeURIComponent(s.parentCollectionId) + "/view");
      document.getElementById("f-parent").replaceChildren(link);
      parentRow.hidden = false;
    }
    const stopping = s.stopping || (s.reason && (s.reason.kind + ": " + s.reason.message
      + (s.reason.fix ? " \u2014 " + s.reason.fix : "")));
    setText("stopping", stopping ? "Stopped early: " + stopping : "");
  }

  function renderLanes(grid) {
    const body = document.querySelector("#lanes tbody");
    const rows = [];
    for (const lane of (grid && grid.lanes) || []) {
      const row = el("tr");
      row.append(el("td", stamp(lane.start) + " \u2192 " + stamp(lane.end)), el("td", NAMES[lane.state]),
        el("td", lane.phase), el("td", lane.attempts));
      rows.push(row);
    }
    if (!rows.length) {
      const row = el("tr", null, "empty");
      const cell = el("td", ended ? "none: the collection has ended" : "none right now");
      cell.colSpan = 4;
      row.append(cell);
      rows.push(row);
    }
    body.replaceChildren(...rows);
  }

  let failuresKey = "";
  const MAX_ROWS = 500;
  function renderFailures(s) {
    const failures = s.failures || [];
    const key = JSON.stringify(failures) + ended;
    if (key === failuresKey) return;
    failuresKey = key;
    const rows = failures.slice(0, MAX_ROWS).map((f) => {
      const row = el("tr");
      row.append(el("td", span(f.window)), el("td", f.kind), el("td", f.attempts ?? "\u2014"),
        el("td", f.reason, "reason"), el("td", f.fix || ""));
      return row;
    });
    if (!rows.length) {
      const row = el("tr", null, "empty");
      const cell = el("td", "none");
      cell.colSpan = 5;
      row.append(cell);
      rows.push(row);
    }
    document.querySelector("#failures tbody").replaceChildren(...rows);
    const failed = (s.progress || {}).failed || 0;
    let note = "";
    if (!ended && failed) {
      note = "The latest failures while the collection runs (" + number(failed) + " so far); the full list appears when it ends.";
    }
    if (failures.length > MAX_ROWS) note = "Showing " + MAX_ROWS + " of " + number(failures.length) + "; the manifest lists all.";
    setText("fail-note", note);
    const retry = document.getElementById("retry");
    const follow = (s.collection || {}).follow;
    if (follow) {
      // A follower's pass: the follower retries its failed windows itself, into the same day collection; a retry
      // collection would write them a second time (POST .../retry-failed answers 409 on a pass).
      retry.hidden = true;
      const link = el("a", follow);
      link.href = withCode(collectionsPath.replace(/\/collections$/, "/follows") + "/" + encodeURIComponent(follow));
      link.id = "follow-link";
      document.getElementById("retry-result").replaceChildren(el("span", "A pass of follower "), link,
        el("span", ": the follower retries its failed windows itself (on a back-off) and is stopped as a whole "
          + "(POST /api/follows/" + follow + "/stop)."));
      return;
    }
    const retryable = ended && (failures.length > 0 || s.status === "Failed" || s.status === "Cancelled");
    retry.disabled = !retryable || retry.dataset.busy === "1";
    retry.title = retryable ? "" : (ended ? "nothing failed" : "available when the collection ends");
  }

  function renderOutput(s) {
    setText("o-prefix", s.outputPrefix || "\u2014");
    const chain = s.chain;
    if (chain && chain.totals && chain.counts) {
      const c = chain.counts;
      setText("o-chain", "root " + chain.root + ", " + number(chain.links) + " links: " + number(chain.totals.records)
        + " records in " + number(chain.totals.chunks) + " chunks; " + number(c.gaps) + " gaps, " + number(c.failures)
        + " still failed, " + number(c.expired) + " expired (the manifest's chain section proves it)");
    }
    const late = s.latency && s.latency.provisional;
    if (s.settling) {
      setText("o-latency", "settling until " + when(s.settling.until) + ": then " + number(s.settling.windows)
        + " provisional windows are read again by themselves and the manifest turns final");
    } else if (s.settled) {
      setText("o-latency", "final: " + number(s.settled.windows) + " windows read again after their band; "
        + number(s.settled.late) + " records had arrived late (counted per window in the manifest)");
    } else if (Array.isArray(late)) {
      setText("o-latency", late.length === 0
        ? "none: every window ended " + s.latency.assumedHours + " h or more before the collection started"
        : late.map((w) => when(w.start) + " \u2192 " + when(w.end)).join(", ") + " may still gain records; collect"
          + " again after " + when(s.latency.settledAfter) + " for a final copy");
    }
    if (s.manifest) {
      document.getElementById("o-manifest").replaceChildren(linkOrText(s.manifest));
      document.getElementById("o-location").replaceChildren(linkOrText(String(s.manifest).replace(/manifest\.json$/, "")));
    } else if (ended) {
      setText("o-manifest", "none was written");
      setText("o-location", "\u2014");
    }
  }

  function renderRate(s, serverNow) {
    const last = samples[samples.length - 1];
    if (!last || serverNow > last.t) samples.push({ t: serverNow, r: Number(s.records || 0) });
    if (samples.length > 91) samples.shift();
    const rates = [];
    for (let k = 1; k < samples.length; k += 1) {
      rates.push(Math.max(0, (samples[k].r - samples[k - 1].r) / ((samples[k].t - samples[k - 1].t) / 1000)));
    }
    const spark = document.getElementById("spark");
    const ctx = spark.getContext("2d");
    ctx.clearRect(0, 0, spark.width, spark.height);
    if (rates.length < 1) return;
    const peak = Math.max(1, ...rates);
    ctx.strokeStyle = COLOR.running;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    rates.forEach((rate, k) => {
      const x = rates.length === 1 ? spark.width / 2 : (k / (rates.length - 1)) * (spark.width - 4) + 2;
      const y = spark.height - 3 - (rate / peak) * (spark.height - 6);
      if (k) ctx.lineTo(x, y); else ctx.moveTo(x, y);
    });
    ctx.stroke();
    const elapsed = (samples[samples.length - 1].t - samples[0].t) / 1000;
    const average = elapsed > 0 ? (samples[samples.length - 1].r - samples[0].r) / elapsed : 0;
    setText("rate", number(Math.round(rates[rates.length - 1])) + " records/s now \u00b7 peak " + number(Math.round(peak))
      + " \u00b7 average " + number(Math.round(average)) + " since this page opened");
  }

  function index(s) {
    failuresByCell = new Map();
    lanesByCell = new Map();
    if (!cells) return;
    for (const f of s.failures || []) {
      const start = Date.parse(String(f.window).split("/")[0]);
      if (Number.isNaN(start)) continue;
      const i = cellAt((start - cells.origin) / 1000);
      if (!failuresByCell.has(i)) failuresByCell.set(i, []);
      failuresByCell.get(i).push(f);
    }
    for (const lane of (s.grid && s.grid.lanes) || []) {
      if (!lanesByCell.has(lane.cell)) lanesByCell.set(lane.cell, []);
      lanesByCell.get(lane.cell).push(lane);
    }
  }

  function render(s, serverNow) {
    const began = performance.now();
    summary = s;
    ended = TERMINAL.has(s.runtimeStatus);
    renderHeader(s, serverNow);
    const grid = s.grid;
    if (grid && grid.known) {
      describeCells(grid);
      renderGrid(grid, false);
      renderLegend(grid.counts || {});
      const omitted = grid.omitted || {};
      const hidden = Object.entries(omitted).map(([k, n]) => number(n) + " " + k).join(", ");
      setText("grid-note", hidden ? "Not drawn while the collection runs (too many to publish): " + hidden
        + " windows; the grid is exact when it ends." : "");
    } else {
      setText("grid-note", grid ? "The grid appears when the collection reports its first progress." : "No grid for this collection.");
    }
    index(s);
    renderLanes(grid);
    renderFailures(s);
    renderOutput(s);
    renderRate(s, serverNow);
    if (focus >= 0 && cells && focus < cells.count) setText("cell-info", details(focus));
    document.body.dataset.state = ended ? "ended" : "running";
    const spent = performance.now() - began;
    stats.renders += 1;
    if (stats.renders === 1) stats.firstMs = spent;
    stats.lastMs = spent;
    stats.totalMs += spent;
    stats.maxMs = Math.max(stats.maxMs, spent);
  }

  // --- polling and retry ---------------------------------------------------------------------------------------
  let backoff = LIVE.refreshSeconds;
  async function tick() {
    let wait = LIVE.refreshSeconds;
    try {
      const answer = await call(base);
      if (answer.status === 200 && answer.body) {
        setText("conn", "");
        render(answer.body, answer.serverNow);
        backoff = LIVE.refreshSeconds;
        if (ended) return;
        if (answer.body.settling) wait = Math.max(wait, 30); // nothing moves until the band has passed
      } else {
        const message = answer.body && answer.body.error ? answer.body.error.message : "";
        setText("conn", "The API answered HTTP " + answer.status + (message ? ": " + message : "")
          + (answer.status === 401 ? " (add ?code=<function key> to this page's URL)" : ""));
        if (answer.status === 404 || answer.status === 400) return;
        backoff = Math.min(30, backoff * 2);
        wait = backoff;
      }
    } catch (error) {
      setText("conn", "Cannot reach the API (" + error.message + "); the last state is shown, retrying.");
      backoff = Math.min(30, backoff * 2);
      wait = backoff;
    }
    setTimeout(tick, wait * 1000);
  }

  document.getElementById("retry").addEventListener("click", async () => {
    const button = document.getElementById("retry");
    const count = (summary && summary.failures && summary.failures.length) || 0;
    const what = count ? count + " failed chunk(s)" : "the chunks that never ran";
    if (!window.confirm("Start a new collection that collects " + what + " of " + collectionId + " again?")) return;
    button.dataset.busy = "1";
    button.disabled = true;
    const result = document.getElementById("retry-result");
    try {
      const answer = await call(base + "/retry-failed", "POST");
      if (answer.status === 202 && answer.body && answer.body.collectionId) {
        const link = el("a", answer.body.collectionId);
        link.href = withCode(collectionsPath + "/" + encodeURIComponent(answer.body.collectionId) + "/view");
        link.id = "retry-link";
        result.replaceChildren(el("span", "Started retry collection "), link,
          el("span", " (" + number(answer.body.chunks) + " chunks)."));
        return;
      }
      const message = answer.body && answer.body.error ? answer.body.error.message : "HTTP " + answer.status;
      result.replaceChildren(el("span", "Not started: " + message));
    } catch (error) {
      result.replaceChildren(el("span", "Not started: " + error.message));
    }
    button.dataset.busy = "";
    button.disabled = false;
  });

  // docs/operations.md's queries for this collection (inlined by the server from shared/log_fields.py).
  const KQL = /*KQL*/null;
  if (KQL) {
    const titles = { failed: "Failed chunks of this collection", throttling: "Throttling by tenant over time",
      slowest: "Slowest chunks" };
    document.getElementById("kql").textContent = Object.entries(KQL).map(([name, query]) =>
      "// " + (titles[name] || name) + "\n" + query.split("<collection id>").join(collectionId)).join("\n\n");
  }

  tick();
})();
