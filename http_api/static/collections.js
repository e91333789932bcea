// The list page: GET <collections>?top=N, refreshed while any listed collection runs.
(() => {
  const { withCode, call, el, setText, number, when, duration, TERMINAL } = LIVE;
  const collectionsPath = location.pathname.replace(/\/view\/?$/, "");
  const followsPath = collectionsPath.replace(/\/collections$/, "/follows");
  const top = Math.min(100, Math.max(1, Number(new URLSearchParams(location.search).get("top")) || 50));

  function row(c) {
    const tr = el("tr");
    const link = el("a", c.collectionId);
    link.href = withCode(collectionsPath + "/" + encodeURIComponent(c.collectionId) + "/view");
    const first = el("td");
    first.append(link);
    if (c.parentCollectionId) first.append(el("div", "retry of " + c.parentCollectionId, "muted"));
    const status = el("td", c.status, "status-" + String(c.status).replace(/[^A-Za-z]/g, ""));
    const progress = el("td");
    const bar = el("span", null, "minibar");
    const fill = el("span");
    fill.style.width = Math.min(100, Number(c.percent) || 0) + "%";
    bar.append(fill);
    progress.append(bar, el("span", c.percent === null || c.percent === undefined ? "\u2014" : c.percent + " %"));
    tr.append(first, status, progress, el("td", number(c.records)), el("td", c.tenantId || "\u2014"),
      el("td", when(c.startDate) + " \u2192 " + when(c.endDate)), el("td", c.source || "\u2014"),
      el("td", when(c.startedAt || c.createdTime)));
    return tr;
  }

  function followRow(f) {
    const tr = el("tr");
    const first = el("td");
    first.append(el("code", f.followId));
    if (f.running && f.running.instanceId) {
      const pass = el("a", "pass " + f.running.day + " (" + f.running.windows + " windows)");
      pass.href = withCode(collectionsPath + "/" + encodeURIComponent(f.running.instanceId) + "/view");
      first.append(el("div", null, "muted"), pass);
    }
    const state = f.paused ? "paused since " + when(f.paused.since) : f.status;
    const status = el("td", state, "status-" + String(f.paused ? "Failed" : f.runtimeStatus).replace(/[^A-Za-z]/g, ""));
    const covered = f.covered ? when(f.covered.start) + " \u2192 " + when(f.covered.end) : "\u2014";
    const lag = f.lagSeconds === null || f.lagSeconds === undefined ? "\u2014" : duration(f.lagSeconds * 1000);
    const p = f.provisional || {};
    const provisional = p.windows ? number(p.windows) + " windows, final after " + when(p.settledAfter) : "none";
    const error = f.paused || f.lastError;
    tr.append(first, status, el("td", f.tenantId || "\u2014"), el("td", f.source || "\u2014"), el("td", covered),
      el("td", lag), el("td", provisional), el("td", number(f.failureCount || 0)),
      el("td", error ? (error.kind || "") + ": " + (error.message || "") : "\u2014"));
    return tr;
  }

  const MAX_FOLLOW_PAGES = 20;
  async function followers() {
    // Every follower: the API answers a page at a time and names the next one (continuationToken).
    const follows = [];
    let token = null;
    for (let page = 0; page < MAX_FOLLOW_PAGES; page += 1) {
      const answer = await call(followsPath + (token ? "?continuationToken=" + encodeURIComponent(token) : ""));
      if (answer.status !== 200 || !answer.body) return false;
      follows.push(...answer.body.follows);
      token = answer.body.continuationToken;
      if (!token) break;
    }
    setText("follows-more", token ? "More followers exist beyond these " + number(follows.length) + "." : "");
    const rows = follows.map(followRow);
    if (!rows.length) {
      const empty = el("tr", null, "empty");
      const cell = el("td", "No followers.");
      cell.colSpan = 9;
      empty.append(cell);
      rows.push(empty);
    }
    document.querySelector("#follows tbody").replaceChildren(...rows);
    return follows.some((f) => !TERMINAL.has(f.runtimeStatus));
  }

  async function tick() {
    let again = false;
    try {
      const answer = await call(collectionsPath + "?top=" + top);
      if (answer.status !== 200 || !answer.body) {
        const message = answer.body && answer.body.error ? answer.body.error.message : "";
        setText("conn", "The API answered HTTP " + answer.status + (message ? ": " + message : "")
          + (answer.status === 401 ? " (add ?code=<function key> to this page's URL)" : ""));
        again = answer.status >= 500;
      } else {
        setText("conn", "");
        const rows = answer.body.collections.map(row);
        if (!rows.length) {
          const empty = el("tr", null, "empty");
          const cell = el("td", "No collections yet.");
          cell.colSpan = 8;
          empty.append(cell);
          rows.push(empty);
        }
        document.querySelector("#list tbody").replaceChildren(...rows);
        setText("more", answer.body.more ? "Older collections exist beyond this list." : "");
        again = answer.body.collections.some((c) => !TERMINAL.has(c.runtimeStatus));
        if (await followers()) again = true;
      }
    } catch (error) {
      setText("conn", "Cannot reach the API (" + error.message + "); retrying.");
      again = true;
    }
    document.body.dataset.state = again ? "running" : "ended";
    if (again) setTimeout(tick, Math.max(5, LIVE.refreshSeconds) * 1000);
  }

  tick();
})();
