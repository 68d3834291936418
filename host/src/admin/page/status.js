// The status page's script: asks GET /status and GET /status/history every 5 s with the admin
// token and draws what they answer. No library; charts are inline SVG; text goes in through
// textContent only (never as HTML), so nothing a handler or a shard says can become markup.
"use strict";

(function () {
  const TOKEN_KEY = "shardhost-admin-token";
  const REFRESH_MS = 5000;
  const SVG = "http://www.w3.org/2000/svg";
  const OUTCOMES = ["ack", "drop", "retry", "retry_after"];
  const OUTCOME_NAMES = { ack: "ack", drop: "drop", retry: "retry", retry_after: "retry-after" };

  let timer = null;

  // A token given as #token=… is taken once, kept for this tab, and removed from the address
  // bar (and so from the history and from anything copied from it).
  function takeTokenFromFragment() {
    const match = /^#token=(.+)$/.exec(location.hash);
    if (!match) return;
    try {
      sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
    } catch (e) {
      showProblem("the token in the address is not valid percent-encoding");
    }
    history.replaceState(null, "", location.pathname + location.search);
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined) node.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : String(c));
    }
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    return node;
  }

  function showProblem(text) {
    const p = byId("problem");
    p.textContent = text;
    p.hidden = !text;
  }

  class Refused extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function getJson(path) {
    const headers = { Accept: "application/json" };
    const t = token();
    if (t) headers.Authorization = "Bearer " + t;
    const answer = await fetch(path, { headers, cache: "no-store", credentials: "omit" });
    if (!answer.ok) {
      let message = answer.statusText;
      try {
        message = (await answer.json()).error || message;
      } catch (e) {
        // not JSON: keep the status text
      }
      throw new Refused(answer.status, message);
    }
    return answer.json();
  }

  async function refresh() {
    clearTimeout(timer);
    try {
      const [report, history] = await Promise.all([getJson("/status"), getJson("/status/history")]);
      byId("login").hidden = true;
      showProblem("");
      render(report, history);
      byId("updated").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      if (e instanceof Refused && e.status === 401) {
        askForToken(token() ? "The token was refused. " : "");
        return; // until a token is given
      }
      showProblem("cannot read the status: " + e.message);
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }

  function askForToken(prefix) {
    const form = byId("login");
    byId("login-why").textContent =
      prefix +
      "This host's admin API wants its token. It is kept in this tab only (sessionStorage) " +
      "and sent with each request.";
    form.hidden = false;
    byId("token").focus();
  }

  // ---- formatting ----

  function lag(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 3600000) return (ms / 60000).toFixed(1) + " min";
    return (ms / 3600000).toFixed(1) + " h";
  }

  function ago(atMs) {
    if (!atMs) return "–";
    const s = Math.max(0, Math.round((Date.now() - atMs) / 1000));
    if (s < 90) return s + " s ago";
    if (s < 5400) return Math.round(s / 60) + " min ago";
    return new Date(atMs).toLocaleString();
  }

  function rate(n) {
    if (n >= 100) return n.toFixed(0);
    if (n >= 10) return n.toFixed(1);
    return n.toFixed(2).replace(/\.?0+$/, "") || "0";
  }

  // ---- charts ----

  // A line chart of `series` ({name: [[atMs, value], ...]}) as an inline <svg>; its scale
  // reaches at least `floor`, so a flat zero line reads as zero, not as noise.
  function chart(kind, series, format, floor) {
    const W = 360, H = 110, L = 44, R = 6, T = 8, B = 16;
    const all = Object.values(series).flat();
    const count = Math.max(0, ...Object.values(series).map((s) => s.length));
    const node = svg("svg", {
      class: "chart " + kind,
      width: W,
      height: H,
      viewBox: `0 0 ${W} ${H}`,
      role: "img",
      "data-points": count,
    });
    node.append(svg("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
    node.append(svg("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
    if (all.length === 0) {
      const t = svg("text", { x: L + 8, y: H / 2 });
      t.textContent = "no samples yet";
      node.append(t);
      return node;
    }
    const x0 = Math.min(...all.map((p) => p[0]));
    const x1 = Math.max(...all.map((p) => p[0]), x0 + 1);
    const top = Math.max(...all.map((p) => p[1]), floor);
    const x = (at) => L + ((at - x0) / (x1 - x0)) * (W - L - R);
    const y = (v) => H - B - (v / top) * (H - B - T);
    for (const [name, points] of Object.entries(series)) {
      if (points.length === 0) continue;
      const coords = points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`);
      if (coords.length === 1) coords.push(`${(x(points[0][0]) + 2).toFixed(1)},${y(points[0][1]).toFixed(1)}`);
      node.append(svg("polyline", { class: name, points: coords.join(" "), "data-series": name }));
    }
    const label = (text, attrs) => {
      const t = svg("text", attrs);
      t.textContent = text;
      node.append(t);
    };
    label(format(top), { x: 2, y: T + 8 });
    label("0", { x: 2, y: H - B });
    label(ago(x0), { x: L, y: H - 3 });
    label("now", { x: W - R - 20, y: H - 3 });
    const title = svg("title");
    title.textContent = `${count} samples, from ${new Date(x0).toLocaleTimeString()}`;
    node.prepend(title);
    return node;
  }

  function charts(points) {
    const outcomes = {};
    for (const o of OUTCOMES) outcomes[o] = points.map((p) => [p.at_ms, p.per_second[o]]);
    const lags = points.filter((p) => p.max_lag_ms !== null).map((p) => [p.at_ms, p.max_lag_ms]);
    const legend = el(
      "div",
      { class: "legend" },
      ...OUTCOMES.map((o) => el("span", { class: o }, OUTCOME_NAMES[o]))
    );
    return el(
      "div",
      { class: "charts" },
      el("figure", {}, chart("outcomes", outcomes, (n) => rate(n) + "/s", 1), el("figcaption", {}, "records per second by outcome", legend)),
      el("figure", {}, chart("lag", { lag: lags }, lag, 1000), el("figcaption", {}, "largest lag (millis behind latest)"))
    );
  }

  // ---- sections ----

  function versions(sub) {
    const dl = el(
      "dl",
      { class: "versions" },
      el("dt", {}, "handler version"),
      el("dd", { class: "version current", "data-version": sub.handler_version }, sub.handler_version || "–"),
      el("dt", {}, "previous version"),
      el("dd", { class: "version previous" }, sub.previous_version || "none (nothing to roll back to)")
    );
    if (sub.shadow) {
      const s = sub.shadow;
      dl.append(
        el("dt", {}, "in shadow"),
        el("dd", { class: "version shadow" }, `${s.version}: ${s.agree} agree, ${s.differ} differ, ${s.trapped} trapped, ${s.timed_out} timed out`)
      );
    }
    dl.append(
      el("dt", {}, "last refused deploy"),
      el("dd", { class: sub.last_deploy_error ? "refused" : "" }, sub.last_deploy_error || "none")
    );
    return dl;
  }

  // A record answered retry-after (no retry cap) that waits to be called again: where it is,
  // its calls so far and when the next one is due.
  function retrying(r) {
    if (!r) return "–";
    const next = new Date(r.next_try_ms).toLocaleTimeString();
    const more = r.records > 1 ? ` (${r.records} records wait)` : "";
    return `${r.at} (${r.key}): ${r.attempts} call${r.attempts === 1 ? "" : "s"}, next at ${next}${more}`;
  }

  function shardTable(shards) {
    const head = el(
      "tr",
      {},
      ...["shard", "owner", "state", "checkpoint", "lag", "settled", "delivered", "held", "held record", "called again", "last error"].map((h) =>
        el("th", {}, h)
      )
    );
    const rows = shards.map((s) =>
      el(
        "tr",
        { class: "shard state-" + (s.state || "starting").replace(/[^a-z]+/g, "-"), "data-shard": s.shard_id },
        el("td", { class: "mono shard-id" }, s.shard_id),
        el("td", { class: "owner" }, s.owner),
        el("td", {}, s.state || "–"),
        el("td", { class: "mono", title: s.checkpoint || "" }, s.checkpoint || "–"),
        el("td", { class: "num" }, lag(s.millis_behind_latest)),
        el("td", { class: "num" }, s.counts.settled),
        el("td", { class: "num" }, s.counts.delivered),
        el("td", { class: "num" }, s.counts.held),
        el("td", { class: "mono" }, s.held_at || "–"),
        el("td", { class: "retrying" }, retrying(s.retrying)),
        el("td", { class: "error" }, s.last_error || "")
      )
    );
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: 11, class: "muted" }, "no shard read here yet")));
    return el("table", { class: "shards" }, el("thead", {}, head), el("tbody", {}, ...rows));
  }

  function subscriptionSection(sub, history) {
    const points = (history.subscriptions.find((h) => h.name === sub.name) || { points: [] }).points;
    return el(
      "section",
      { class: "subscription", "data-subscription": sub.name },
      el("h2", {}, sub.name, " ", el("span", { class: "muted" }, `stream ${sub.stream}, ${sub.read || "polling"}`)),
      versions(sub),
      charts(points),
      shardTable(sub.shards)
    );
  }

  function renderErrors(report, history) {
    const list = byId("errors");
    const items = history.errors
      .slice()
      .reverse()
      .map((e) =>
        el(
          "li",
          { class: "recent-error" },
          el("span", { class: "muted" }, new Date(e.at_ms).toLocaleTimeString() + " "),
          `${e.subscription}${e.shard ? " / " + e.shard : ""}: `,
          e.error
        )
      );
    list.replaceChildren(...(items.length ? items : [el("li", { class: "muted" }, "none")]));
    const failures = report.failures || [];
    byId("failures").hidden = failures.length === 0;
    byId("failure-list").replaceChildren(
      ...failures.map((f) => el("li", {}, `${f.subscription}${f.shard ? " / " + f.shard : ""}: ${f.reason}`))
    );
  }

  function rolloutText(r) {
    if (!r) return "–";
    const share = (r.share_permille / 10).toFixed(1) + "%";
    let text = `${r.state} ${r.version.slice(0, 12)} on ${share}`;
    if (r.state === "running") text += `, window ends ${new Date(r.started_at_ms + r.window_ms).toLocaleTimeString()}`;
    if (r.reason) text += ` (${r.reason})`;
    return text;
  }

  function renderFleet(fleet) {
    const section = byId("fleet");
    section.hidden = !fleet;
    if (!fleet) return;
    byId("service").textContent = fleet.service;
    byId("desired").replaceChildren(
      ...fleet.desired.map((d) =>
        el(
          "tr",
          { class: "desired", "data-subscription": d.subscription },
          el("td", {}, d.subscription),
          el("td", { class: "mono" }, d.version || "(each instance's config)", d.problem ? el("div", { class: "refused" }, d.problem) : null),
          el("td", { class: "num" }, d.generation),
          el("td", { class: "mono" }, d.previous_version || "–"),
          el("td", {}, d.deployed_at_ms ? `${ago(d.deployed_at_ms)} by ${d.deployed_by || "?"}` : "–"),
          el("td", { class: d.rollout && d.rollout.state === "running" ? "rollout running" : "rollout" }, rolloutText(d.rollout))
        )
      )
    );
    byId("instances").replaceChildren(
      ...fleet.instances.map((i) => {
        const runs = Object.entries(i.subscriptions || {}).map(([name, r]) =>
          el(
            "div",
            {},
            `${name}: `,
            el("code", {}, r.version.slice(0, 12)),
            ` (gen ${r.generation}, ${r.shards} shards)`,
            r.refused ? el("span", { class: "refused" }, ` refused ${r.refused.version.slice(0, 12)}: ${r.refused.error}`) : null
          )
        );
        return el(
          "tr",
          { class: "instance", "data-owner": i.owner },
          el("td", { class: "mono" }, i.owner),
          el("td", { class: "mono" }, i.admin || "–"),
          el("td", {}, i.live ? "live" : "gone"),
          el("td", {}, ago(i.beat_ms)),
          el("td", {}, ...runs)
        );
      })
    );
  }

  function render(report, history) {
    byId("owner").textContent = "instance " + report.owner;
    byId("subscriptions").replaceChildren(...report.subscriptions.map((s) => subscriptionSection(s, history)));
    renderErrors(report, history);
    renderFleet(report.fleet);
  }

  document.addEventListener("DOMContentLoaded", () => {
    takeTokenFromFragment();
    byId("login").addEventListener("submit", (event) => {
      event.preventDefault();
      const given = byId("token").value.trim();
      if (!given) return;
      sessionStorage.setItem(TOKEN_KEY, given);
      byId("token").value = "";
      refresh();
    });
    byId("forget").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      location.reload();
    });
    refresh();
  });
})();
