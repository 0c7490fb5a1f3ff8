/* Arena: helpers shared by the page scripts (number formats, relative times). */
"use strict";
window.Arena = (() => {
  const num = (v, digits = 2) => (v === null || v === undefined ? "—" : Number(v).toFixed(digits));
  const pct = (v, digits = 1) => (v === null || v === undefined ? "—" : (100 * v).toFixed(digits) + "%");
  /** A step count, short: 500, 8k, 1.5M, "—" for none (as the server's steps filter writes it). */
  const steps = (n) =>
    n == null ? "—" : n >= 1e6 ? `${n / 1e6}M` : n >= 1000 ? `${n / 1000}k` : String(n);

  /** "12 s ago", "5 min ago", "3 h ago", "2 d ago" for an ISO timestamp. */
  function ago(iso) {
    if (!iso) return "—";
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return "—";
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return Math.floor(s / 86400) + " d ago";
  }

  /** Turn every <time class="ago"> into a relative time (the absolute one stays as a tooltip). */
  function refreshTimes(root = document) {
    for (const el of root.querySelectorAll("time.ago")) {
      const iso = el.getAttribute("datetime");
      if (!iso) continue;
      if (!el.title) el.title = el.textContent;
      el.textContent = ago(iso);
    }
  }

  /** document.createElement with attributes and children (strings become text nodes). */
  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "style") node.style.cssText = v;
      else node.setAttribute(k, v);
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  document.addEventListener("DOMContentLoaded", () => {
    refreshTimes();
    setInterval(refreshTimes, 5000);
  });
  return { num, pct, steps, ago, refreshTimes, el };
})();
