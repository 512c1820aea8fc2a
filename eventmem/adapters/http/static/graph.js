// eventmem web UI: the relationship graph. A force layout (springs along links, every pair repelling,
// a pull towards the centre so that no cluster drifts away, no overlaps) settles before the first paint and is
// fitted into the view; then zoom (wheel, pinch, buttons, + - 0), pan (drag the background) and
// drag a memory. Edges are arrows from source to target with their relation; nodes are coloured by
// type, sized by importance, and lead to their memory. Plain SVG, no library.
"use strict";

const GRAPH_COLOURS = ["#0b57b3", "#c2410c", "#15803d", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#be185d",
  "#4d7c0f", "#4338ca", "#57534e", "#0f766e", "#9f1239", "#1d4ed8", "#854d0e"];

function colourOf(kinds) {
  const order = [...new Set([...(window.ui && window.ui.types) || [], ...kinds])];
  const known = new Map(order.map((kind, i) => [kind, GRAPH_COLOURS[i % GRAPH_COLOURS.length]]));
  return (kind) => known.get(kind) || "#57534e";
}

// -- the layout ------------------------------------------------------------------------------------

/** Positions for ``nodes`` (``{id}``) joined by ``links`` (``{source, target}`` ids), drawn as circles of
 * ``radii``: a settled force layout around (0, 0), spread to fill about ``width`` by ``height`` pixels.
 * Springs along links, every pair repelling (the graph holds at most 500 memories: a plain loop over
 * typed arrays beats a Barnes–Hut tree at that size), a pull towards the centre, stronger across the
 * view's short side, and no two circles overlapping. Every force scales with the spacing, so the
 * picture is the same at any size. Deterministic: the same graph, the same picture. */
function forceLayout(nodes, links, options = {}) {
  const { width = 900, height = 600, ticks = 300 } = options;
  const n = nodes.length, radii = Float64Array.from(options.radii || nodes.map(() => 6));
  const spacing = Math.max(10, Math.min(90, Math.sqrt((width * height) / Math.max(n, 1)) * SPREAD.spacing));
  const x = new Float64Array(n), y = new Float64Array(n), vx = new Float64Array(n), vy = new Float64Array(n);
  for (let i = 0; i < n; i++) { // a phyllotaxis spiral to start from
    const r = spacing * 0.5 * Math.sqrt(0.5 + i), a = i * Math.PI * (3 - Math.sqrt(5));
    x[i] = r * Math.cos(a); y[i] = r * Math.sin(a);
  }
  const index = new Map(nodes.map((node, i) => [node.id, i]));
  const edges = links.map((l) => [index.get(l.source), index.get(l.target)])
    .filter(([a, b]) => a !== undefined && b !== undefined && a !== b);
  const degree = new Float64Array(n);
  for (const [a, b] of edges) { degree[a] += 1; degree[b] += 1; }
  const charge = SPREAD.charge * spacing * spacing, distance = spacing;
  const aspect = Math.max(0.25, Math.min(4, width / height));
  const gx = SPREAD.gravity / Math.sqrt(aspect), gy = SPREAD.gravity * Math.sqrt(aspect); // wide view, wide picture
  const decay = 1 - Math.pow(0.001, 1 / ticks);
  let alpha = 1;
  for (let tick = 0; tick < ticks; tick++) {
    alpha -= alpha * decay;
    for (const [a, b] of edges) {
      let dx = x[b] + vx[b] - x[a] - vx[a], dy = y[b] + vy[b] - y[a] - vy[a];
      const l = Math.max(Math.hypot(dx, dy), 1e-6);
      const k = ((l - distance) / l) * alpha / Math.min(degree[a], degree[b]);
      const bias = degree[a] / (degree[a] + degree[b]);
      dx *= k; dy *= k;
      vx[b] -= dx * bias; vy[b] -= dy * bias;
      vx[a] += dx * (1 - bias); vy[a] += dy * (1 - bias);
    }
    const push = charge * alpha;
    for (let i = 0; i < n; i++) {
      const xi = x[i], yi = y[i];
      let fx = 0, fy = 0;
      for (let j = i + 1; j < n; j++) {
        let dx = xi - x[j], dy = yi - y[j];
        if (dx === 0 && dy === 0) { dx = 1e-3 * (j - i); dy = 1e-3; }
        const d2 = Math.max(dx * dx + dy * dy, 1), w = push / d2;
        fx += dx * w; fy += dy * w;
        vx[j] -= dx * w; vy[j] -= dy * w;
        const want = radii[i] + radii[j] + 3; // circles do not overlap
        if (d2 < want * want) {
          const d = Math.sqrt(d2), shove = ((want - d) / d) * 0.35;
          fx += dx * shove; fy += dy * shove; vx[j] -= dx * shove; vy[j] -= dy * shove;
        }
      }
      vx[i] += fx - xi * gx * alpha; vy[i] += fy - yi * gy * alpha;
    }
    for (let i = 0; i < n; i++) {
      vx[i] *= 0.6; vy[i] *= 0.6;
      x[i] += vx[i]; y[i] += vy[i];
    }
  }
  return nodes.map((_, i) => ({ x: x[i], y: y[i] }));
}

const SPREAD = { spacing: 0.4, charge: 0.1, gravity: 0.1 };

// -- the drawing -----------------------------------------------------------------------------------

function edgeGeometry(a, b, ra, rb, bend) {
  // a straight or bent (quadratic) edge from circle a to circle b, ending at b's rim for the arrow
  const mx = (a.x + b.x) / 2, my = (a.y + b.y) / 2;
  const dx = b.x - a.x, dy = b.y - a.y, len = Math.max(Math.hypot(dx, dy), 1e-6);
  const cx = mx - (dy / len) * bend, cy = my + (dx / len) * bend;
  const u1x = cx - a.x, u1y = cy - a.y, l1 = Math.max(Math.hypot(u1x, u1y), 1e-6);
  const u2x = b.x - cx, u2y = b.y - cy, l2 = Math.max(Math.hypot(u2x, u2y), 1e-6);
  const sx = a.x + (u1x / l1) * ra, sy = a.y + (u1y / l1) * ra;
  const ex = b.x - (u2x / l2) * (rb + 1.5), ey = b.y - (u2y / l2) * (rb + 1.5);
  const d = bend ? `M${sx.toFixed(1)},${sy.toFixed(1)}Q${cx.toFixed(1)},${cy.toFixed(1)} ${ex.toFixed(1)},${ey.toFixed(1)}`
    : `M${sx.toFixed(1)},${sy.toFixed(1)}L${ex.toFixed(1)},${ey.toFixed(1)}`;
  return { d, lx: 0.25 * sx + 0.5 * cx + 0.25 * ex, ly: 0.25 * sy + 0.5 * cy + 0.25 * ey };
}

function drawGraph(nodes, links, size = {}) {
  const width = Math.round(size.width || 900), height = Math.round(size.height || 600);
  const big = nodes.length > 60;
  const colour = colourOf(nodes.map((n) => n.kind));
  const padX = width < 600 ? 16 : Math.min(110, width * 0.12), padY = 28; // room for the names at the sides
  const room = { width: width - 2 * padX, height: height - 2 * padY };
  // circles by importance, smaller where many memories share a small view (a phone)
  const shrink = Math.max(0.6, Math.min(1, Math.sqrt((room.width * room.height) / Math.max(nodes.length, 1)) / 30));
  const radius = (node) => ((big ? 3.5 : 6) + (big ? 4.5 : 7) * (node.importance || 0)) * shrink;
  const layout = forceLayout(nodes, links, { ...room, radii: nodes.map(radius) });
  const items = nodes.map((node, i) => ({ node, p: layout[i], r: radius(node), degree: 0 }));
  const byId = new Map(items.map((item) => [item.node.id, item]));
  const edges = links.filter((l) => byId.has(l.source) && byId.has(l.target) && l.source !== l.target)
    .map((link) => ({ link, a: byId.get(link.source), b: byId.get(link.target), bend: 0 }));
  const pairs = new Map();
  for (const e of edges) {
    e.a.degree += 1; e.b.degree += 1;
    const key = [e.link.source, e.link.target].sort().join(" ");
    if (!pairs.has(key)) pairs.set(key, []);
    pairs.get(key).push(e);
  }
  for (const group of pairs.values()) { // parallel and opposite links bend apart, each with its own label
    if (group.length < 2) continue;
    group.forEach((e, i) => {
      const offset = (i - (group.length - 1) / 2) * 22 || 11;
      e.bend = e.link.source < e.link.target ? offset : -offset;
    });
  }
  // which memories are named without zooming in: every one in a small graph, else the most linked
  const ranked = [...items].sort((x, y) => y.degree - x.degree || (y.node.importance || 0) - (x.node.importance || 0));
  const few = ranked.slice(0, big ? Math.max(12, Math.round(Math.sqrt(items.length) * 1.5)) : items.length);

  const svg = h("svg", { svg: true, class: "graph" + (big ? " big" : ""), viewBox: `0 0 ${width} ${height}`,
    width, height, role: "group", "aria-label": `${nodes.length} memories and ${edges.length} relationships` });
  const defs = h("defs", { svg: true });
  for (const [id, cls] of [["arrow", "arrow"], ["arrow-lit", "arrow lit"]]) {
    defs.append(h("marker", { svg: true, id: "graph-" + id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 8,
      markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse", class: cls },
    h("path", { svg: true, d: "M0,1L10,5L0,9z" })));
  }
  const background = h("rect", { svg: true, class: "graph-background", x: 0, y: 0, width, height });
  const edgeLayer = h("g", { svg: true, class: "edges" });
  const labelLayer = h("g", { svg: true, class: "edge-labels" });
  const nodeLayer = h("g", { svg: true, class: "nodes" });
  svg.append(defs, background, edgeLayer, labelLayer, nodeLayer);
  for (const e of edges) {
    e.path = h("path", { svg: true, class: "edge", "marker-end": "url(#graph-arrow)", "data-source": e.link.source,
      "data-target": e.link.target, "data-relation": e.link.relation },
    h("title", { svg: true, text: `${e.a.node.title || e.a.node.id} —${e.link.relation}→ ${e.b.node.title || e.b.node.id}` }));
    e.label = h("text", { svg: true, class: "edge-label", "text-anchor": "middle", text: e.link.relation.replace(/_/g, " ") });
    edgeLayer.append(e.path);
    labelLayer.append(e.label);
  }
  for (const item of items) {
    const label = (item.node.title || item.node.id).slice(0, 48);
    item.circle = h("circle", { svg: true, r: item.r.toFixed(1), fill: colour(item.node.kind) });
    item.text = h("text", { svg: true, class: "name", text: label });
    item.width = label.length * 6.6 + 4; // about, at 11.5 px: enough to keep names apart
    item.anchor = h("a", { svg: true, href: "#/memory/" + encodeURIComponent(item.node.id), class: "node",
      "data-id": item.node.id, "data-kind": item.node.kind, "aria-label": `${label} (${item.node.kind})` },
    h("title", { svg: true, text: `${label}\n${item.node.kind} · importance ${item.node.importance} · ${item.degree} links` }),
    item.circle, item.text);
    nodeLayer.append(item.anchor);
  }

  // the view: graph units to screen pixels; fitted so that every memory is inside, with room for names
  const view = { scale: 1, tx: width / 2, ty: height / 2, fit: 1 };
  const fit = () => {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const { p } of items) { x0 = Math.min(x0, p.x); y0 = Math.min(y0, p.y); x1 = Math.max(x1, p.x); y1 = Math.max(y1, p.y); }
    const scale = Math.min(1.6, room.width / Math.max(x1 - x0, 1), room.height / Math.max(y1 - y0, 1));
    view.scale = view.fit = scale;
    view.tx = width / 2 - ((x0 + x1) / 2) * scale;
    view.ty = height / 2 - ((y0 + y1) / 2) * scale;
  };
  const screen = (p) => ({ x: p.x * view.scale + view.tx, y: p.y * view.scale + view.ty });
  let queued = false;
  const draw = () => {
    queued = false;
    const at = new Map(items.map((item) => [item, screen(item.p)]));
    for (const item of items) {
      const s = at.get(item);
      item.circle.setAttribute("cx", s.x.toFixed(1));
      item.circle.setAttribute("cy", s.y.toFixed(1));
      const left = s.x > width * 0.62; // names point away from the right edge
      item.text.setAttribute("x", (left ? s.x - item.r - 4 : s.x + item.r + 4).toFixed(1));
      item.text.setAttribute("y", (s.y + 4).toFixed(1));
      item.text.setAttribute("text-anchor", left ? "end" : "start");
    }
    for (const e of edges) {
      const g = edgeGeometry(at.get(e.a), at.get(e.b), e.a.r, e.b.r, e.bend * Math.min(1, view.scale / view.fit));
      e.path.setAttribute("d", g.d);
      e.label.setAttribute("x", g.lx.toFixed(1));
      e.label.setAttribute("y", (g.ly - 3).toFixed(1));
    }
    const zoomedIn = view.scale / view.fit;
    // names, most linked first, where they fit inside the view without covering one another
    const taken = new Set(), cell = 8, shown = new Set();
    for (const item of zoomedIn >= 1.8 ? ranked : few) {
      const s = at.get(item), left = s.x > width * 0.62;
      const x0 = left ? s.x - item.r - 4 - item.width : s.x + item.r + 4, y0 = s.y - 9;
      if (x0 < 0 || y0 < 0 || x0 + item.width > width || y0 + 14 > height) continue;
      const cells = [];
      for (let cx = Math.floor(x0 / cell); cx <= Math.floor((x0 + item.width) / cell); cx++) {
        for (let cy = Math.floor(y0 / cell); cy <= Math.floor((y0 + 14) / cell); cy++) cells.push(cx * 100003 + cy);
      }
      if (cells.some((c) => taken.has(c))) continue;
      for (const c of cells) taken.add(c);
      shown.add(item);
    }
    for (const item of items) item.text.classList.toggle("shown", shown.has(item));
    svg.classList.toggle("all-relations", edges.length <= 80 || zoomedIn >= 2.5 || showRelations.checked);
    svg.dataset.scale = (view.scale / view.fit).toFixed(3);
  };
  const redraw = () => { if (!queued) { queued = true; requestAnimationFrame(draw); } };

  const toSvg = (event) => {
    const box = svg.getBoundingClientRect();
    return { x: ((event.clientX - box.left) / box.width) * width, y: ((event.clientY - box.top) / box.height) * height };
  };
  const zoom = (factor, cx = width / 2, cy = height / 2) => {
    const next = Math.min(view.fit * 12, Math.max(view.fit * 0.5, view.scale * factor));
    view.tx = cx - ((cx - view.tx) * next) / view.scale;
    view.ty = cy - ((cy - view.ty) * next) / view.scale;
    view.scale = next;
    draw();
  };
  const reset = () => { fit(); draw(); };

  // highlight a memory's links (hover or focus): its edges and their relations stand out
  const focus = (item) => {
    svg.classList.toggle("focusing", Boolean(item));
    for (const other of items) other.anchor.classList.toggle("lit", other === item);
    for (const other of items) other.anchor.classList.remove("near");
    for (const e of edges) {
      const lit = Boolean(item) && (e.a === item || e.b === item);
      e.path.classList.toggle("lit", lit);
      e.label.classList.toggle("lit", lit);
      e.path.setAttribute("marker-end", lit ? "url(#graph-arrow-lit)" : "url(#graph-arrow)");
      if (lit) { (e.a === item ? e.b : e.a).anchor.classList.add("near"); }
    }
  };
  for (const item of items) {
    item.anchor.addEventListener("pointerenter", () => { if (!drag) focus(item); });
    item.anchor.addEventListener("pointerleave", () => { if (!drag) focus(null); });
    item.anchor.addEventListener("focus", () => focus(item));
    item.anchor.addEventListener("blur", () => focus(null));
  }

  // pointers: one drags a memory or pans; two pinch to zoom; a drag never follows the memory's link
  const pointers = new Map();
  let drag = null, moved = false, pinch = null;
  svg.addEventListener("pointerdown", (event) => {
    pointers.set(event.pointerId, toSvg(event));
    if (pointers.size === 2) {
      const [p, q] = [...pointers.values()];
      pinch = { distance: Math.hypot(p.x - q.x, p.y - q.y), scale: view.scale };
      drag = null;
      return;
    }
    const item = items.find((d) => d.anchor.contains(event.target));
    drag = { item, start: toSvg(event), tx: view.tx, ty: view.ty, x: item ? item.p.x : 0, y: item ? item.p.y : 0, id: event.pointerId };
    moved = false;
  });
  svg.addEventListener("pointermove", (event) => {
    if (!pointers.has(event.pointerId)) return;
    pointers.set(event.pointerId, toSvg(event));
    if (pinch && pointers.size === 2) {
      const [p, q] = [...pointers.values()];
      const factor = (pinch.scale * Math.hypot(p.x - q.x, p.y - q.y)) / Math.max(pinch.distance, 1) / view.scale;
      zoom(factor, (p.x + q.x) / 2, (p.y + q.y) / 2);
      return;
    }
    if (!drag || drag.id !== event.pointerId) return;
    const now = toSvg(event), dx = now.x - drag.start.x, dy = now.y - drag.start.y;
    if (!moved && Math.hypot(dx, dy) < 4) return;
    if (!moved) svg.setPointerCapture(event.pointerId);
    moved = true;
    if (!drag.item) { view.tx = drag.tx + dx; view.ty = drag.ty + dy; redraw(); return; }
    drag.item.p.x = drag.x + dx / view.scale;
    drag.item.p.y = drag.y + dy / view.scale;
    redraw();
  });
  const release = (event) => {
    pointers.delete(event.pointerId);
    if (pointers.size < 2) pinch = null;
    if (drag && drag.id === event.pointerId) drag = null;
  };
  svg.addEventListener("pointerup", release);
  svg.addEventListener("pointercancel", release);
  svg.addEventListener("click", (event) => { if (moved) { event.preventDefault(); event.stopPropagation(); moved = false; } }, true);
  svg.addEventListener("wheel", (event) => {
    event.preventDefault();
    const { x, y } = toSvg(event);
    zoom(Math.exp(-Math.max(-300, Math.min(300, event.deltaY)) / 600), x, y);
  }, { passive: false });

  const showRelations = h("input", { type: "checkbox", onchange: () => draw() });
  const controls = h("div", { class: "actions graph-controls" },
    h("button", { type: "button", class: "secondary", onclick: () => zoom(1.25), text: "Zoom in" }),
    h("button", { type: "button", class: "secondary", onclick: () => zoom(0.8), text: "Zoom out" }),
    h("button", { type: "button", class: "secondary", onclick: reset, text: "Fit" }),
    h("label", { class: "check" }, showRelations, "Every relation"),
    h("span", { class: "note", text: "Wheel or pinch to zoom, drag the background to pan, drag a memory to move it, click it to open." }));
  const counts = new Map();
  for (const item of items) counts.set(item.node.kind, (counts.get(item.node.kind) || 0) + 1);
  const legend = h("ul", { class: "legend", "aria-label": "Colours by type" },
    [...counts].sort((x, y) => y[1] - x[1]).map(([kind, n]) => h("li", { "data-kind": kind },
      h("span", { class: "swatch", style: { background: colour(kind) } }), `${kind} `, h("span", { class: "note", text: String(n) }))));
  const figure = h("div", { class: "graph-figure", tabindex: 0, "aria-label": "Graph: + and - zoom, 0 fits",
    onkeydown: (event) => {
      if (event.target !== figure) return;
      if (event.key === "+" || event.key === "=") zoom(1.25);
      else if (event.key === "-") zoom(0.8);
      else if (event.key === "0") reset();
    } }, controls, svg, legend);
  fit();
  draw();
  return figure;
}

window.forceLayout = forceLayout;
window.drawGraph = drawGraph;
