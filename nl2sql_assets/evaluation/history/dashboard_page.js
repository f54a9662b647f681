// The results dashboard's page: draws DashboardData (nl2sql_assets/evaluation/history/dashboard.py)
// with the Plotly bundle inlined beside it. Every count is recounted here from the runs' per-case
// verdicts, so the filters (suite, mode, config, role, tag) change every view. Nothing is fetched.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("dashboard-data").textContent);
  const Z = 1.959963984540054;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const kid of kids) e.append(kid instanceof Node ? kid : String(kid));
    return e;
  };
  const pct = (x) => (x === null ? "n/a" : (100 * x).toFixed(1) + "%");
  const usd = (x) => (x === null ? "n/a" : "$" + x.toPrecision(4));

  function wilson(passed, total) {
    if (!total) return null;
    const p = passed / total, z2 = Z * Z, den = 1 + z2 / total;
    const centre = (p + z2 / (2 * total)) / den;
    const half = (Z * Math.sqrt((p * (1 - p)) / total + z2 / (4 * total * total))) / den;
    return { rate: p, low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
  }

  // McNemar's exact test, two-sided, on the discordant pairs (b lost, c gained).
  function mcnemar(b, c) {
    const n = b + c;
    if (!n) return 1;
    const k = Math.min(b, c);
    let logC = 0, sum = 0;
    for (let i = 0; i <= k; i++) {
      if (i > 0) logC += Math.log(n - i + 1) - Math.log(i);
      sum += Math.exp(logC - n * Math.LN2);
    }
    return Math.min(1, 2 * sum);
  }

  // ---------------------------------------------------------------- filters
  const FILTERS = ["suite", "mode", "config", "role", "tag"];
  const values = {
    suite: [...new Set(D.runs.map((r) => r.suite))].sort(),
    mode: [...new Set(D.runs.map((r) => r.mode))].sort(),
    config: [...new Set(D.runs.map((r) => r.config))].sort(),
    role: [...new Set(D.cases.map((c) => c.role))].sort(),
    tag: [...new Set(D.cases.flatMap((c) => c.tags))].sort(),
  };
  for (const f of FILTERS) {
    const select = $("filter-" + f);
    select.append(el("option", { value: "" }, "all"));
    for (const v of values[f]) select.append(el("option", { value: v }, v));
    select.addEventListener("change", draw);
  }
  const chosen = () => Object.fromEntries(FILTERS.map((f) => [f, $("filter-" + f).value]));

  function selection() {
    const f = chosen();
    const runs = D.runs.filter((r) => (!f.suite || r.suite === f.suite) && (!f.mode || r.mode === f.mode) &&
      (!f.config || r.config === f.config));
    const cases = [];
    D.cases.forEach((c, i) => {
      if ((!f.suite || c.suite === f.suite) && (!f.role || c.role === f.role) && (!f.tag || c.tags.includes(f.tag))) cases.push(i);
    });
    return { runs, cases };
  }

  function tally(outcomes, cases) {
    let passed = 0, total = 0;
    if (outcomes === null) return null;
    for (const i of cases) {
      const o = outcomes[i];
      if (o === "p") { passed++; total++; } else if (o === "f") total++;
    }
    return { passed, total };
  }

  // ---------------------------------------------------------------- 1. accuracy over time
  function drawTime(sel) {
    const traces = [];
    const series = {};
    for (const r of sel.runs) (series[r.suite + " / " + r.config] ||= []).push(r);
    let points = 0;
    Object.keys(series).sort().forEach((name, n) => {
      const runs = series[name];
      const rows = runs.map((r) => ({ r, s: tally(r.strict, sel.cases), l: tally(r.lenient, sel.cases) }))
        .filter((x) => x.s.total > 0);
      if (!rows.length) return;
      points += rows.length;
      const x = rows.map((x) => x.r.recorded_at);
      const w = rows.map((x) => wilson(x.s.passed, x.s.total));
      const colour = `hsl(${(n * 67) % 360},65%,42%)`;
      traces.push({ x: x.concat([...x].reverse()), y: w.map((v) => v.high).concat(w.map((v) => v.low).reverse()),
        fill: "toself", fillcolor: colour.replace("hsl", "hsla").replace(")", ",0.15)"), line: { width: 0 }, mode: "lines",
        hoverinfo: "skip", showlegend: false, type: "scatter" });
      traces.push({ x, y: w.map((v) => v.rate), name: name + " strict", mode: "lines+markers", type: "scatter",
        line: { color: colour }, text: rows.map((x) => `${x.s.passed}/${x.s.total}`) });
      const lenient = rows.filter((x) => x.l !== null && x.l.total > 0);
      if (lenient.length) traces.push({ x: lenient.map((x) => x.r.recorded_at), y: lenient.map((x) => x.l.passed / x.l.total),
        name: name + " lenient", mode: "lines", type: "scatter", line: { color: colour, dash: "dash" } });
    });
    $("time-count").textContent = `${points} run(s) drawn`;
    Plotly.react("time-chart", traces, { yaxis: { range: [0, 1], tickformat: ".0%", title: "accuracy" },
      margin: { t: 10 }, height: 360, legend: { orientation: "h" } }, { displaylogo: false, responsive: true });
  }

  // ---------------------------------------------------------------- 2. two runs side by side
  function label(r) { return `${r.recorded_at.slice(0, 16).replace("T", " ")}  ${r.suite} / ${r.config}  (${r.source})`; }
  function fillRuns(sel) {
    for (const side of ["a", "b"]) {
      const select = $("run-" + side), keep = select.value;
      select.replaceChildren(...sel.runs.map((r) => el("option", { value: r.id }, label(r))));
      if (sel.runs.some((r) => r.id === keep)) select.value = keep;
      else if (sel.runs.length) select.value = defaultPair(sel)[side].id;
    }
  }
  // By default run B is the newest run, run A the one before it of the same suite and config
  // (else the run before it in time).
  function defaultPair(sel) {
    const b = sel.runs[sel.runs.length - 1];
    const same = sel.runs.filter((r) => r.suite === b.suite && r.config === b.config);
    const a = same.length > 1 ? same[same.length - 2] : sel.runs[Math.max(0, sel.runs.length - 2)];
    return { a, b };
  }
  function caseDetails(i, a, b) {
    const c = D.cases[i];
    const pre = (t) => el("pre", {}, t === undefined || t === null ? "(none)" : t);
    const reason = (r) => (r.reasons[i] >= 0 ? D.reasons[r.reasons[i]] : "(passed)") +
      (r.differences[i] >= 0 ? " | " + D.reasons[r.differences[i]] : "");
    const sql = (r) => (r.sql[i] >= 0 ? D.sql[r.sql[i]] : null);
    return el("details", { class: "case", "data-case": `${c.suite}/${c.case_id}@${c.role}` },
      el("summary", {}, `${c.case_id} @ ${c.role}` + (c.domain ? `  [${c.domain}]` : "")),
      el("div", {}, el("b", {}, "question: "), c.question || "(not in the suites read)"),
      el("div", {}, el("b", {}, "gold SQL")), pre(c.gold_sql),
      el("div", {}, el("b", {}, "run A: "), reason(a)), pre(sql(a)),
      el("div", {}, el("b", {}, "run B: "), reason(b)), pre(sql(b)));
  }
  function drawPair(sel) {
    const a = D.runs.find((r) => r.id === $("run-a").value), b = D.runs.find((r) => r.id === $("run-b").value);
    const lost = [], gained = [];
    if (a && b) for (const i of sel.cases) {
      if (a.strict[i] === "p" && b.strict[i] === "f") lost.push(i);
      if (a.strict[i] === "f" && b.strict[i] === "p") gained.push(i);
    }
    $("pair-summary").textContent = a && b
      ? `${lost.length} case(s) went from pass to fail, ${gained.length} from fail to pass; McNemar p = ${mcnemar(lost.length, gained.length).toPrecision(3)}`
      : "pick two runs";
    $("pair-lost-count").textContent = String(lost.length);
    $("pair-gained-count").textContent = String(gained.length);
    $("pair-lost").replaceChildren(...lost.map((i) => caseDetails(i, a, b)));
    $("pair-gained").replaceChildren(...gained.map((i) => caseDetails(i, a, b)));
  }

  // ---------------------------------------------------------------- 3. cost against accuracy
  function latestByConfig(sel) {
    const latest = {};
    for (const r of sel.runs) latest[r.suite + " / " + r.config] = r;  // runs are oldest first
    return latest;
  }
  function drawCost(sel) {
    const rows = [];
    for (const [name, r] of Object.entries(latestByConfig(sel)).sort()) {
      const s = tally(r.strict, sel.cases);
      if (!s.total) continue;
      const perCase = r.case_runs ? r.cost_usd / r.case_runs : null;
      const perCorrect = s.passed ? r.cost_usd / s.passed : null;
      rows.push({ name, acc: s.passed / s.total, perCase, perCorrect, unpriced: r.unpriced_calls });
    }
    $("cost-table").replaceChildren(el("tr", {}, ...["config", "accuracy", "cost per case", "cost per correct answer", "unpriced calls"].map((h) => el("th", {}, h))),
      ...rows.map((x) => el("tr", { class: "cost-row" }, el("td", {}, x.name), el("td", {}, pct(x.acc)),
        el("td", {}, usd(x.perCase) + (x.unpriced ? " or more" : "")), el("td", {}, usd(x.perCorrect)), el("td", {}, x.unpriced))));
    const spent = rows.some((x) => x.perCorrect > 0 || x.unpriced > 0);
    chartOr("cost-chart", spent, rows.length ? "Nothing was spent in these runs ($0 for every config): no cost to plot."
      : "No run here has a question run to put a cost on.", () =>
      Plotly.react("cost-chart", [{ x: rows.map((x) => x.acc), y: rows.map((x) => x.perCorrect), text: rows.map((x) => x.name),
        mode: "markers+text", textposition: "top center", type: "scatter" }],
        { xaxis: { range: [0, 1.05], tickformat: ".0%", title: "accuracy (strict, latest run)" },
          yaxis: { title: "dollars per correct answer", rangemode: "tozero" }, margin: { t: 10 }, height: 320 },
        { displaylogo: false, responsive: true }));
  }

  // A chart where there is something to see, else one sentence in its place (never empty axes).
  function chartOr(id, something, sentence, drawIt) {
    const box = $(id);
    if (something) {
      if (box.querySelector(".empty-chart")) box.replaceChildren();
      drawIt();
      return;
    }
    Plotly.purge(box);
    box.replaceChildren(el("p", { class: "note empty-chart" }, sentence));
  }

  // ---------------------------------------------------------------- 4. failure reasons
  function drawReasons(sel) {
    const b = D.runs.find((r) => r.id === $("run-b").value);
    const by = { domain: {}, difficulty: {} };
    let failures = 0;
    if (b) for (const i of sel.cases) {
      if (b.strict[i] !== "f") continue;
      failures++;
      const reason = b.reasons[i] >= 0 ? D.reasons[b.reasons[i]].split(":")[0] : "(no reason)";
      for (const dim of ["domain", "difficulty"]) {
        const key = D.cases[i][dim] || "(none)";
        ((by[dim][reason] ||= {})[key] = ((by[dim][reason] || {})[key] || 0) + 1);
      }
    }
    $("reasons-count").textContent = `${failures} failed case(s) in run B`;
    for (const dim of ["domain", "difficulty"]) {
      const keys = [...new Set(Object.values(by[dim]).flatMap((m) => Object.keys(m)))].sort();
      const traces = Object.keys(by[dim]).sort().map((reason) => ({ type: "bar", name: reason, x: keys,
        y: keys.map((k) => by[dim][reason][k] || 0) }));
      chartOr("reasons-" + dim, failures > 0, dim === "domain" ? (b ? "No case failed in run B: no reason to chart."
        : "Pick a run B to see why its cases failed.") : "", () =>
        Plotly.react("reasons-" + dim, traces, { barmode: "stack", margin: { t: 10 }, height: 300,
          xaxis: { title: dim }, yaxis: { title: "failed cases" } }, { displaylogo: false, responsive: true }));
    }
  }

  // ---------------------------------------------------------------- 5. neighbour overturns
  function drawNeighbours(sel) {
    const rows = [];
    for (const r of sel.runs) {
      if (r.robust === null) continue;
      for (const i of sel.cases) if (r.strict[i] === "p" && r.robust[i] === "f") rows.push([r, i]);
    }
    $("neighbours-count").textContent = `${rows.length} pass(es) overturned on a neighbour database`;
    $("neighbours-table").replaceChildren(el("tr", {}, ...["run", "case", "neighbours", "why", "predicted SQL"].map((h) => el("th", {}, h))),
      ...rows.map(([r, i]) => el("tr", { class: "overturn-row" }, el("td", {}, label(r)),
        el("td", {}, `${D.cases[i].case_id} @ ${D.cases[i].role}`), el("td", {}, r.neighbours),
        el("td", {}, r.differences[i] >= 0 ? D.reasons[r.differences[i]] : ""),
        el("td", {}, el("code", {}, r.sql[i] >= 0 ? D.sql[r.sql[i]] : "")))));
  }

  // ---------------------------------------------------------------- 5b. the gold audit
  function drawAudit() {
    const suite = $("filter-suite").value;
    const flags = D.audit.filter((f) => !suite || f.suite === suite);
    $("audit-count").textContent = `${flags.length} finding(s) on the gold of the runs' suites`;
    $("audit-table").replaceChildren(el("tr", {}, ...["suite", "case", "finding", "what"].map((h) => el("th", {}, h))),
      ...flags.map((f) => el("tr", { class: "audit-row" }, el("td", {}, f.suite), el("td", {}, f.case_id),
        el("td", {}, f.kind), el("td", {}, f.message))));
  }

  function draw() {
    const sel = selection();
    $("runs-count").textContent = `${sel.runs.length} run(s), ${sel.cases.length} case(s) selected`;
    fillRuns(sel);
    drawTime(sel);
    drawPair(sel);
    drawCost(sel);
    drawReasons(sel);
    drawNeighbours(sel);
    drawAudit();
    document.body.setAttribute("data-drawn", String(Number(document.body.getAttribute("data-drawn") || 0) + 1));
    document.body.setAttribute("data-drawn-ms", performance.now().toFixed(0));  // since the page began loading
  }
  $("run-a").addEventListener("change", () => { const s = selection(); drawPair(s); });
  $("run-b").addEventListener("change", () => { const s = selection(); drawPair(s); drawReasons(s); });
  draw();
})();
