// The list page: GET <collections>?top=N, refreshed while any listed collection runs.
(() => {
  const { withCode, call, el, setText, number, when, TERMINAL } = LIVE;
  const collectionsPath = location.pathname.replace(/\/view\/?$/, "");
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
