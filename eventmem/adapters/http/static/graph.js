// eventmem web UI: a small force-directed layout (Fruchterman–Reingold) drawn as SVG links.
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
  for (const link of links) {
    const a = at.get(link.source), b = at.get(link.target);
    svg.append(h("line", { svg: true, x1: a.x, y1: a.y, x2: b.x, y2: b.y, "data-relation": link.relation },
      h("title", { svg: true, text: link.relation })));
  }
  nodes.forEach((node, i) => {
    const label = (node.title || node.id).slice(0, 40);
    svg.append(h("a", { svg: true, href: "#/memory/" + encodeURIComponent(node.id), class: "node", "data-id": node.id,
      "aria-label": `${label} (${node.kind})` },
      h("circle", { svg: true, cx: pos[i].x, cy: pos[i].y, r: 6 + 6 * node.importance }),
      h("text", { svg: true, x: pos[i].x + 12, y: pos[i].y + 4, text: label })));
  });
  return svg;
}

window.forceLayout = forceLayout;
window.drawGraph = drawGraph;
