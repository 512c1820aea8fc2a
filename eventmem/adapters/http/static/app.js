// eventmem web UI: the router, the API client, the project picker and live updates (server-sent events).
"use strict";

const ui = {
  project: "",
  token: sessionStorage.getItem("eventmem-token") || "",
  stream: null,
  changes: 0,
  types: [],
  refreshTimer: null,
  renders: 0, // renders begun: one that ends after a later one began is dropped, the later one shows newer data
  asked: 0, // the last render begun by the user (a click, a link), not by a live refresh
  shown: 0, // the render on screen
};

function h(tag, attrs, ...children) {
  const svg = ["svg", "g", "line", "path", "circle", "rect", "text", "title", "a", "defs", "marker"].includes(tag) && attrs && attrs.svg;
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "svg" || value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "text") el.textContent = value;
    else if (key === "style") Object.assign(el.style, value); // through the CSSOM: the CSP refuses style attributes
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined && child !== false) el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

function authHeaders() {
  return ui.token ? { Authorization: "Bearer " + ui.token } : {};
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json", ...authHeaders(), ...(options.headers || {}) };
  const init = { method: options.method || "GET", headers };
  if (init.method !== "GET") headers["Content-Type"] = "application/json"; // the server asks it of every change
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(options.body);
  }
  const response = await fetch("/api/v1" + path, init);
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = new Error((data && data.detail) || response.statusText);
    error.status = response.status;
    throw error;
  }
  return { data, etag: response.headers.get("ETag") };
}

const projectPath = () => "/projects/" + encodeURIComponent(ui.project);
const query = (params) => {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    for (const v of [].concat(value)) if (v !== "" && v !== null && v !== undefined) q.append(key, v);
  }
  const text = q.toString();
  return text ? "?" + text : "";
};

const ROUTES = [
  [/^#?\/?$/, "dashboard", "Dashboard"],
  [/^#\/memories$/, "browser", "Memories"],
  [/^#\/memory\/([^/?]+)$/, "detail", "Memory"],
  [/^#\/search$/, "search", "Search"],
  [/^#\/graph$/, "graph", "Graph"],
  [/^#\/timeline$/, "timeline", "Timeline"],
  [/^#\/settings$/, "settings", "Settings"],
];

/** What a view answers when a live refresh found nothing it shows changed: the page on screen stays as it is
 * (the graph keeps its zoom, pan and dragged memories). */
const KEEP = Symbol("keep");
window.KEEP = KEEP;

async function render(live = false) {
  const main = document.getElementById("main");
  const hash = location.hash || "#/";
  const route = ROUTES.find(([pattern]) => pattern.test(hash)) || ROUTES[0];
  const args = hash.match(route[0]) || [];
  for (const link of document.querySelectorAll("nav a")) {
    const current = link.getAttribute("href") === "#" + hash.replace(/^#/, "").replace(/^\/memory\/.*/, "/memories");
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = route[2] + " · eventmem";
  if (!ui.project) return;
  const view = h("div", { class: "view", "data-view": route[1] });
  const begun = ++ui.renders;
  if (!live) ui.asked = begun;
  let kept = false;
  try {
    kept = (await window.views[route[1]](view, ...args.slice(1).map(decodeURIComponent), { live })) === KEEP;
  } catch (error) {
    view.replaceChildren(h("h2", { text: route[2] }), h("p", { class: "alert", role: "alert", text: error.message }));
    if (error.search) view.append(h("p", {}, h("a", { href: "#/search", text: "Search" }), " · ", h("a", { href: "#/memories", text: "Memories" })));
    if (error.status === 401) view.append(h("p", {}, "This server needs a token: enter it under ", h("a", { href: "#/settings", text: "Settings" }), "."));
  }
  main.dataset.checked = String(Number(main.dataset.checked || 0) + 1);
  if (begun !== ui.renders) return; // a later render is on its way (a live refresh during a click's, or the reverse)
  // the user asked for a page (a click, a link) since the one on screen was drawn: this render shows it, live or not
  const asked = ui.asked > ui.shown;
  if (kept || (live && !asked && main.querySelector("[data-editing]"))) return; // never pull a form or a view from under the user
  main.replaceChildren(view);
  ui.shown = begun;
  main.dataset.rendered = String(Number(main.dataset.rendered || 0) + 1);
  if (asked) main.focus({ preventScroll: true });
}

function changed() {
  ui.changes += 1;
  const live = document.getElementById("live");
  live.dataset.changes = String(ui.changes);
  live.textContent = "live · updated " + new Date().toLocaleTimeString();
  clearTimeout(ui.refreshTimer);
  ui.refreshTimer = setTimeout(() => render(true), 250);
}

async function listen() {
  if (ui.stream) ui.stream.abort();
  const controller = new AbortController();
  ui.stream = controller;
  const live = document.getElementById("live");
  try {
    const response = await fetch("/api/v1" + projectPath() + "/stream", { headers: authHeaders(), signal: controller.signal });
    if (!response.ok) throw new Error(response.statusText);
    live.textContent = "live";
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.split("\n").includes("event: change")) changed();
      }
    }
  } catch (error) {
    if (controller.signal.aborted) return;
  }
  live.textContent = "reconnecting…";
  setTimeout(() => { if (ui.stream === controller) listen(); }, 2000);
}

async function start() {
  const select = document.getElementById("project");
  try {
    const { data } = await api("/projects");
    const saved = new URLSearchParams(location.search).get("project") || localStorage.getItem("eventmem-project");
    ui.project = data.projects.includes(saved) ? saved : data.default;
    ui.types = data.types;
    select.replaceChildren(...data.projects.map((name) => h("option", { value: name, selected: name === ui.project }, name)));
  } catch (error) {
    document.getElementById("main").replaceChildren(
      h("p", { class: "alert", role: "alert", text: error.message }),
      h("p", {}, "Enter this server's token under ", h("a", { href: "#/settings", text: "Settings" }), "."),
    );
    ui.project = "";
    if (location.hash === "#/settings") window.views.tokenOnly(document.getElementById("main"));
    return;
  }
  select.addEventListener("change", () => {
    ui.project = select.value;
    localStorage.setItem("eventmem-project", ui.project);
    listen();
    render();
  });
  window.addEventListener("hashchange", () => render());
  listen();
  render();
}

window.ui = ui;
window.h = h;
window.api = api;
window.projectPath = projectPath;
window.query = query;
window.render = render;
start();
