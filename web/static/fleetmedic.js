// fleetmedic pages: local times, the fleet grid on canvas, Plotly figures. No build step.
"use strict";

function localTimes() {
  document.querySelectorAll("time[data-ts]").forEach((t) => {
    const d = new Date(Number(t.dataset.ts) * 1000);
    t.title = d.toISOString();
    t.textContent = d.toLocaleString();
  });
}

function jsonOf(id) {
  const el = document.getElementById(id);
  return el ? JSON.parse(el.textContent) : null;
}

// A grid node is [name, group, drained, states, utils, refs, indexes]; refs is one number when
// every GPU of the node has the same job (-1: none), indexes null when they are 0, 1, 2, ...
function jobRef(n, i) { return typeof n[5] === "number" ? n[5] : n[5][i]; }
function gpuIndex(n, i) { return n[6] === null ? i : n[6][i]; }

function layoutNodes(nodes, width) {
  // Few nodes: one labelled row each. Many: compact blocks that wrap (10k GPUs fit a screen).
  const rows = nodes.length <= 64;
  const cw = rows ? 30 : 9, ch = rows ? 20 : 9, gap = rows ? 3 : 1;
  const label = rows ? 150 : 0, nodeGap = rows ? 0 : 5;
  const boxes = [];
  let x = 0, y = 0;
  for (const n of nodes) {
    const w = n[3].length * (cw + gap);
    if (rows) { x = 0; }
    else if (x + w > width && x > 0) { x = 0; y += ch + 6; }
    boxes.push({ node: n, x: x + label, y: y, cw: cw, ch: ch, gap: gap });
    if (rows) { y += ch + gap + 2; } else { x += w + nodeGap; }
  }
  const height = rows ? y : y + ch + 6;
  return { boxes: boxes, height: Math.max(height, ch), rows: rows, label: label };
}

function drawGroup(canvas, nodes, grid) {
  const width = Math.max(canvas.parentElement.clientWidth - 10, 300);
  const lay = layoutNodes(nodes, width - 150);
  canvas.width = width; canvas.height = lay.height;
  const ctx = canvas.getContext("2d");
  ctx.font = "11px system-ui, sans-serif"; ctx.textBaseline = "middle";
  for (const b of lay.boxes) {
    const n = b.node;
    if (lay.rows) { ctx.fillStyle = n[2] ? "#6a1b9a" : "#212121"; ctx.fillText(n[0] + (n[2] ? " (drained)" : ""), 0, b.y + b.ch / 2); }
    for (let i = 0; i < n[3].length; i++) {
      const x = b.x + i * (b.cw + b.gap);
      ctx.fillStyle = grid.colors[n[3][i]] || "#000";
      ctx.fillRect(x, b.y, b.cw, b.ch);
      if (lay.rows && n[4][i] >= 0) { ctx.fillStyle = "#fff"; ctx.fillText(n[4][i] + "%", x + 3, b.y + b.ch / 2); }
    }
    if (n[2]) { ctx.strokeStyle = n[2] === 2 ? "#6a1b9a" : "#ef6c00"; ctx.lineWidth = 2; ctx.strokeRect(b.x - 1, b.y - 1, n[3].length * (b.cw + b.gap) + 1, b.ch + 2); }
  }
  canvas._layout = lay;
}

function hitTest(canvas, ev) {
  const r = canvas.getBoundingClientRect(), lay = canvas._layout;
  const mx = ev.clientX - r.left, my = ev.clientY - r.top;
  for (const b of lay.boxes) {
    if (my < b.y || my > b.y + b.ch || mx < b.x) continue;
    const i = Math.floor((mx - b.x) / (b.cw + b.gap));
    if (i >= 0 && i < b.node[3].length) return { node: b.node, i: i };
  }
  return null;
}

function fleetGrid() {
  const grid = jsonOf("grid-data");
  if (!grid) return;
  const tip = document.getElementById("grid-tip");
  document.querySelectorAll("canvas.grid").forEach((canvas) => {
    const gi = Number(canvas.dataset.group);
    const nodes = grid.nodes.filter((n) => n[1] === gi);
    drawGroup(canvas, nodes, grid);
    canvas.addEventListener("mousemove", (ev) => {
      const hit = hitTest(canvas, ev);
      if (!hit) { tip.style.display = "none"; return; }
      const n = hit.node, s = n[3][hit.i], u = n[4][hit.i], j = jobRef(n, hit.i);
      let text = n[0] + " GPU " + gpuIndex(n, hit.i) + " · " + grid.labels[s];
      if (u >= 0) text += " · util " + u + "%";
      if (j >= 0) text += " · job " + grid.jobs[j][0] + " (" + (grid.jobs[j][1] || "?") + ")";
      if (n[2]) text += n[2] === 2 ? " · drained by fleetmedic" : " · drained";
      tip.textContent = text; tip.style.display = "block";
      tip.style.left = ev.clientX + 12 + "px"; tip.style.top = ev.clientY + 12 + "px";
    });
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    canvas.addEventListener("click", (ev) => {
      const hit = hitTest(canvas, ev);
      if (hit) window.location.href = "/nodes/" + encodeURIComponent(hit.node[0]) + "#gpu-" + gpuIndex(hit.node, hit.i);
    });
  });
}

function plots() {
  if (typeof Plotly === "undefined") return;
  document.querySelectorAll("[data-figure]").forEach((div) => {
    const fig = jsonOf(div.dataset.figure);
    if (!fig) return;
    // Times come as UTC milliseconds; Date objects make Plotly draw them in local time.
    if (fig.layout.xaxis && fig.layout.xaxis.type === "date") {
      fig.data.forEach((t) => { if (Array.isArray(t.x)) t.x = t.x.map((v) => new Date(v)); });
    }
    Plotly.newPlot(div, fig.data, fig.layout, { displaylogo: false, responsive: true });
  });
  const heat = document.getElementById("heatmap");
  if (!heat) return;
  fetch(heat.dataset.src, { credentials: "same-origin" }).then((r) => r.json()).then((h) => {
    if (!h.nodes.length) { heat.textContent = "No telemetry in this window yet."; return; }
    heat.textContent = "";
    const times = h.times.map((t) => new Date(t));
    const text = h.spans.map((spans) => h.times.map((t) => {
      const names = spans.filter((s) => s[0] < t + h.bucket_ms && s[1] > t).map((s) => s[2]);
      return names.slice(0, 3).join(", ") || "no job";
    }));
    Plotly.newPlot(heat, [{
      type: "heatmap", z: h.z, x: times, y: h.nodes, text: text, zmin: 0, zmax: 100,
      colorscale: "Viridis", colorbar: { title: "util %" },
      hovertemplate: "%{y} %{x}<br>util %{z}%<br>%{text}<extra></extra>",
    }], {
      height: Math.min(Math.max(240, 14 * h.nodes.length + 80), 900),
      margin: { l: 110, r: 20, t: 10, b: 40 }, yaxis: { autorange: "reversed" },
    }, { displaylogo: false, responsive: true });
  });
}

document.addEventListener("DOMContentLoaded", () => { localTimes(); fleetGrid(); plots(); });
