"use strict";
// Shared by the collection page and the list page. Everything that comes from the API reaches the document through
// textContent or validated attributes, never as markup: failure reasons carry the audit services' own text.

const LIVE = (() => {
  const query = new URLSearchParams(location.search);
  const code = query.get("code");
  const refreshSeconds = Math.min(60, Math.max(0.25, Number(query.get("refresh")) || 2));

  /** The URL with this page's function key (if it has one) added, so API calls pass function auth on Azure. */
  function withCode(url) {
    if (!code) return url;
    return url + (url.includes("?") ? "&" : "?") + "code=" + encodeURIComponent(code);
  }

  /** GET or POST JSON; resolves to {status, body, serverNow} (serverNow from the Date header, to ignore clock skew). */
  async function call(url, method) {
    const response = await fetch(withCode(url), {
      method: method || "GET", cache: "no-store", headers: { Accept: "application/json" }, credentials: "same-origin",
    });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    const date = Date.parse(response.headers.get("Date") || "");
    return { status: response.status, body, serverNow: Number.isNaN(date) ? Date.now() : date };
  }

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function setText(id, text) {
    const node = document.getElementById(id);
    if (node && node.textContent !== String(text)) node.textContent = String(text);
  }

  /** A link only for http(s) URLs; anything else (a local folder, a javascript: URL) is shown as text. */
  function linkOrText(value) {
    const text = String(value);
    if (/^https?:\/\//i.test(text)) {
      const a = el("a", text);
      a.href = text;
      a.rel = "noreferrer noopener";
      a.target = "_blank";
      return a;
    }
    return el("code", text);
  }

  function number(n) { return n === null || n === undefined ? "\u2014" : Number(n).toLocaleString("en-US"); }

  function when(value) {
    if (!value) return "\u2014";
    const date = new Date(value);
    return Number.isNaN(date.getTime()) ? String(value) : date.toISOString().replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC");
  }

  function duration(ms) {
    if (!(ms >= 0) || !Number.isFinite(ms)) return "\u2014";
    const s = Math.round(ms / 1000);
    if (s < 60) return s + " s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + " min " + (s % 60) + " s";
    const h = Math.floor(m / 60);
    return h < 48 ? h + " h " + (m % 60) + " min" : Math.floor(h / 24) + " d " + (h % 24) + " h";
  }

  const TERMINAL = new Set(["Completed", "Failed", "Terminated", "Canceled"]);

  return { code, refreshSeconds, withCode, call, el, setText, linkOrText, number, when, duration, TERMINAL };
})();
