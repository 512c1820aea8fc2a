// eventmem web UI: a small force-directed layout (Fruchterman–Reingold) drawn as SVG links, with zoom, pan
// and nodes that can be dragged.
"use strict";

function forceLayout(nodes, links, width, height) {
  const n = nodes.length;
  const pos = nodes.map((_, i) => ({
    x: width / 2 + Math.cos(i * 2.4) * 12 * Math.sqrt(i + 1),
    y: height / 2 + Math.sin(i * 2.4) * 12 * Math.sqrt(i + 1),
    dx: 0, dy: 0,
  }));
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const edges = links.map((l) => [index.get(l.source), index.get(l.target)]).filter(([a, b]) => a !== undefined && b !== undefined);
  const k = 0.75 * Math.sqrt((width * height) / Math.max(n, 1));
  const rounds = n > 300 ? 80 : 200;
  for (let round = 0; round < rounds; round++) {
    const temperature = (width / 10) * (1 - round / rounds) + 1;
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const dx = pos[i].x - pos[j].x, dy = pos[i].y - pos[j].y;
        const d = Math.max(Math.hypot(dx, dy), 0.01), force = (k * k) / d;
        pos[i].dx += (dx / d) * force; pos[i].dy += (dy / d) * force;
        pos[j].dx -= (dx / d) * force; pos[j].dy -= (dy / d) * force;
      }
    }
    for (const [a, b] of edges) {
      const dx = pos[a].x - pos[b].x, dy = pos[a].y - pos[b].y;
      const d = Math.max(Math.hypot(dx, dy), 0.01), force = (d * d) / k;
      pos[a].dx -= (dx / d) * force; pos[a].dy -= (dy / d) * force;
      pos[b].dx += (dx / d) * force; pos[b].dy += (dy / d) * force;
    }
    for (const p of pos) {
      p.dx += (width / 2 - p.x) * 0.05; p.dy += (height / 2 - p.y) * 0.05;
      const d = Math.max(Math.hypot(p.dx, p.dy), 0.01), step = Math.min(d, temperature);
      p.x = Math.min(width - 30, Math.max(30, p.x + (p.dx / d) * step));
      p.y = Math.min(height - 20, Math.max(20, p.y + (p.dy / d) * step));
      p.dx = 0; p.dy = 0;
    }
  }
  return pos;
}

function drawGraph(nodes, links) {
  const width = 900, height = 600;
  const pos = forceLayout(nodes, links, width, height);
  const at = new Map(nodes.map((node, i) => [node.id, pos[i]]));
  const svg = h("svg", { svg: true, class: "graph", viewBox: `0 0 ${width} ${height}`, role: "group",
    "aria-label": `${nodes.length} memories and ${links.length} relationships` });
  const view = h("g", { svg: true, class: "viewport" });
  svg.append(view);
  const lines = links.map((link) => {
    const a = at.get(link.source), b = at.get(link.target);
    const line = h("line", { svg: true, x1: a.x, y1: a.y, x2: b.x, y2: b.y, "data-relation": link.relation },
      h("title", { svg: true, text: link.relation }));
    view.append(line);
    return [link, line];
  });
  const drawn = nodes.map((node, i) => {
    const label = (node.title || node.id).slice(0, 40);
    const circle = h("circle", { svg: true, cx: pos[i].x, cy: pos[i].y, r: 6 + 6 * node.importance });
    const text = h("text", { svg: true, x: pos[i].x + 12, y: pos[i].y + 4, text: label });
    const anchor = h("a", { svg: true, href: "#/memory/" + encodeURIComponent(node.id), class: "node", "data-id": node.id,
      "aria-label": `${label} (${node.kind})` }, circle, text);
    view.append(anchor);
    return { node, anchor, circle, text, p: pos[i] };
  });

  // zoom (wheel, buttons, + and - keys) and pan (drag the background); drag a node to move it
  let scale = 1, tx = 0, ty = 0;
  const apply = () => view.setAttribute("transform", `translate(${tx} ${ty}) scale(${scale})`);
  const toGraph = (event) => {
    const box = svg.getBoundingClientRect();
    return { x: ((event.clientX - box.left) / box.width) * width, y: ((event.clientY - box.top) / box.height) * height };
  };
  const zoom = (factor, cx = width / 2, cy = height / 2) => {
    const next = Math.min(8, Math.max(0.25, scale * factor));
    tx = cx - ((cx - tx) * next) / scale; ty = cy - ((cy - ty) * next) / scale; scale = next;
    apply();
  };
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const { x, y } = toGraph(event);
    zoom(event.deltaY < 0 ? 1.2 : 1 / 1.2, x, y);
  }, { passive: false });
  let drag = null, moved = false;
  svg.addEventListener("pointerdown", (event) => {
    const item = drawn.find((d) => d.anchor.contains(event.target));
    drag = { item, start: toGraph(event), tx, ty, x: item ? item.p.x : 0, y: item ? item.p.y : 0 };
    moved = false;
  });
  svg.addEventListener("pointermove", (event) => {
    if (!drag) return;
    const now = toGraph(event), dx = now.x - drag.start.x, dy = now.y - drag.start.y;
    if (!moved && Math.hypot(dx, dy) < 4) return;
    if (!moved) svg.setPointerCapture(event.pointerId);
    moved = true;
    if (!drag.item) { tx = drag.tx + dx; ty = drag.ty + dy; apply(); return; }
    const p = drag.item.p;
    p.x = drag.x + dx / scale; p.y = drag.y + dy / scale;
    drag.item.circle.setAttribute("cx", p.x); drag.item.circle.setAttribute("cy", p.y);
    drag.item.text.setAttribute("x", p.x + 12); drag.item.text.setAttribute("y", p.y + 4);
    for (const [link, line] of lines) {
      if (link.source === drag.item.node.id) { line.setAttribute("x1", p.x); line.setAttribute("y1", p.y); }
      if (link.target === drag.item.node.id) { line.setAttribute("x2", p.x); line.setAttribute("y2", p.y); }
    }
  });
  const release = () => { drag = null; };
  svg.addEventListener("pointerup", release);
  svg.addEventListener("pointercancel", release);
  svg.addEventListener("click", (event) => { if (moved) { event.preventDefault(); moved = false; } }, true);
  const reset = () => { scale = 1; tx = 0; ty = 0; apply(); };
  const controls = h("div", { class: "actions graph-controls" },
    h("button", { type: "button", class: "secondary", onclick: () => zoom(1.25), text: "Zoom in" }),
    h("button", { type: "button", class: "secondary", onclick: () => zoom(0.8), text: "Zoom out" }),
    h("button", { type: "button", class: "secondary", onclick: reset, text: "Reset view" }),
    h("span", { class: "note", text: "Wheel to zoom, drag the background to pan, drag a memory to move it." }));
  const figure = h("div", { class: "graph-figure", tabindex: 0, "aria-label": "Graph: + and - zoom, 0 resets",
    onkeydown: (event) => {
      if (event.key === "+" || event.key === "=") zoom(1.25);
      else if (event.key === "-") zoom(0.8);
      else if (event.key === "0") reset();
    } }, controls, svg);
  return figure;
}

window.forceLayout = forceLayout;
window.drawGraph = drawGraph;
