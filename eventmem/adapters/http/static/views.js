// eventmem web UI: one function per page, each filling the element it is given.
"use strict";

const field = (label, control) => h("label", {}, label, control);
const tags = (list) => (list || []).map((t) => h("span", { class: "tag" }, t));
const when = (iso) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—");
const nameOf = (m) => m.title || m.summary || m.id;
const memoryLink = (id, text) => h("a", { href: "#/memory/" + encodeURIComponent(id) }, text || id);
// a memory a client's lifecycle hook recorded (its writer is hook:CLIENT@SESSION), marked where it is shown
const hookMark = (m) => ((m.created_by || "").startsWith("hook:")
  ? h("span", { class: "tag hook-mark", title: "recorded by a lifecycle hook: " + m.created_by, text: "hook" }) : null);

function countTable(caption, counts, shown = 10) {
  const rows = Object.entries(counts || {}).sort((a, b) => b[1] - a[1]);
  const max = Math.max(1, ...rows.map(([, v]) => v));
  const more = rows.length - shown;
  return h("div", { class: "card" }, h("table", { class: "counts" },
    h("caption", { class: "note", text: caption }),
    h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "Name" }), h("th", { scope: "col", class: "count", text: "Count" }))),
    h("tbody", {}, rows.length ? rows.slice(0, shown).map(([k, v]) => h("tr", {},
      h("td", {}, h("span", { class: "bar", style: { width: `${Math.round((v / max) * 100)}%` } }), h("span", { text: k })),
      h("td", { class: "count", text: v })))
      : h("tr", {}, h("td", { colspan: 2, text: "none yet" })))),
  more > 0 ? h("p", { class: "note", text: `and ${more} more` }) : null);
}

function barChart(perDay) {
  const days = Object.entries(perDay || {});
  const max = Math.max(1, ...days.map(([, n]) => n));
  const width = Math.max(300, days.length * 18), height = 140;
  const svg = h("svg", { svg: true, class: "chart", viewBox: `0 0 ${width} ${height + 20}`, role: "img",
    "aria-label": `Saves per day over ${days.length} days` });
  days.forEach(([day, n], i) => {
    const barHeight = Math.round((n / max) * height);
    svg.append(h("rect", { svg: true, x: i * 18 + 2, y: height - barHeight, width: 14, height: barHeight },
      h("title", { svg: true, text: `${day}: ${n}` })));
  });
  if (days.length) svg.append(h("text", { svg: true, x: 2, y: height + 15, text: days[0][0] }));
  return svg;
}

function table(headers, rows) {
  // on a narrow screen each row is a block of its cells, each named by its column (see app.css)
  for (const row of [].concat(rows)) {
    [...row.children].forEach((cell, i) => { if (headers[i]) cell.setAttribute("data-label", headers[i][0]); });
  }
  return h("div", { class: "scroll" }, h("table", { class: "stack" },
    h("thead", {}, h("tr", {}, headers.map(([text, cls]) => h("th", { scope: "col", class: cls, text })))),
    h("tbody", {}, rows)));
}

function activityMemories(event) {
  // a link's two ends with an arrow between them; else the memory (or the first few an archive moved)
  const links = (event.memories || []).map((m) => h("a", { href: "#/memory/" + encodeURIComponent(m.id),
    class: ["deleted", "expired"].includes(m.status) ? "gone" : null, "data-id": m.id,
    title: `${m.id} (${m.status})` }, m.title || m.id));
  if (!links.length) return "—";
  if (["linked", "unlinked"].includes(event.type) && links.length === 2) return [links[0], " → ", links[1]];
  return links.flatMap((link, i) => (i ? [", ", link] : [link]));
}

function historyNote(line) {
  // a link's event names the memory at its other end by its title, linked to it (ids are for machines)
  const other = line.other;
  const note = line.type === "unlinked" ? line.note.replace(/^link \S+ removed/, "link removed") : line.note;
  if (!other) return note;
  const link = () => h("a", { href: "#/memory/" + encodeURIComponent(other.id), "data-id": other.id,
    class: ["deleted", "expired"].includes(other.status) ? "gone" : null, title: `${other.id} (${other.status})` },
  other.title || other.id);
  const parts = note.split(other.id);
  return parts.length > 1 ? parts.flatMap((part, i) => (i ? [link(), part] : [part])) : [note, " (with ", link(), ")"];
}

const views = {
  async dashboard(el) {
    const { data } = await api(projectPath() + "/dashboard");
    const total = Object.values(data.by_type).reduce((a, b) => a + b, 0);
    el.append(h("h2", { text: `Dashboard — ${total} live memories` }),
      h("div", { class: "grid" }, countTable("By type", data.by_type), countTable("By scope", data.by_scope),
        countTable("By project", data.by_project), countTable("By tag", data.by_tag)),
      h("h3", { text: "Saves over time" }), h("div", { class: "card scroll" }, barChart(data.saves_per_day)),
      h("h3", { text: "Recent activity" }),
      table([["When"], ["Event"], ["Memory"], ["By", "hide-narrow"]], data.recent.map((e) => h("tr", { class: "activity" },
        h("td", { class: "when", text: when(e.ts) }), h("td", { text: e.relation ? `${e.type} · ${e.relation.replace(/_/g, " ")}` : e.type }),
        h("td", { class: "memories" }, activityMemories(e)),
        h("td", { class: "hide-narrow", text: e.by || "—" })))));
  },

  async browser(el) {
    const f = (views.filters = views.filters || { status: "live", sort: "recent", offset: 0 });
    const form = h("form", { class: "filters", "aria-label": "Filters" },
      field("Status", h("select", { name: "status" }, ["live", "expired", "deleted", "superseded", "all"]
        .map((s) => h("option", { value: s, selected: f.status === s, text: s })))),
      field("Type", h("select", { name: "type" }, h("option", { value: "", text: "any" }),
        ui.types.map((k) => h("option", { value: k, selected: f.type === k, text: k })))),
      field("Scope", h("select", { name: "scope" }, ["", "project", "global"]
        .map((s) => h("option", { value: s, selected: (f.scope || "") === s, text: s || "any" })))),
      field("Tag", h("input", { name: "tag", value: f.tag || "", size: 12 })),
      field("Min. importance", h("input", { name: "min_importance", type: "number", min: 0, max: 1, step: 0.1,
        value: f.min_importance || "" })),
      field("Created after", h("input", { name: "created_after", type: "date", value: f.created_after || "" })),
      field("Created before", h("input", { name: "created_before", type: "date", value: f.created_before || "" })),
      field("Sort", h("select", { name: "sort" }, ["recent", "importance", "created", "title"]
        .map((s) => h("option", { value: s, selected: f.sort === s, text: s })))),
      h("button", { type: "submit", text: "Apply" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      Object.assign(f, Object.fromEntries(new FormData(form)), { offset: 0 });
      render();
    });
    const { data } = await api(projectPath() + "/memories" + query({ ...f, limit: 50 }));
    const rows = data.memories.map((m) => h("tr", { "data-id": m.id },
      h("td", {}, memoryLink(m.id, nameOf(m)), hookMark(m)), h("td", { text: m.kind }), h("td", { class: "hide-narrow", text: m.scope }),
      h("td", { class: "hide-narrow" }, tags(m.tags)), h("td", { text: m.importance }),
      h("td", { class: "status-" + m.status, text: m.superseded ? "superseded" : m.status }),
      h("td", { class: "hide-narrow", text: when(m.updated_at) })));
    const page = (offset) => () => { f.offset = offset; render(); };
    el.append(h("h2", { text: "Memories" }), form,
      table([["Memory"], ["Type"], ["Scope", "hide-narrow"], ["Tags", "hide-narrow"], ["Importance"], ["Status"],
        ["Updated", "hide-narrow"]], rows),
      h("div", { class: "pager" },
        h("button", { class: "secondary", disabled: f.offset === 0, onclick: page(Math.max(0, f.offset - 50)), text: "Previous" }),
        h("span", { text: data.total ? `${f.offset + 1}–${f.offset + data.memories.length} of ${data.total}` : "no memory matches" }),
        h("button", { class: "secondary", disabled: f.offset + 50 >= data.total, onclick: page(f.offset + 50), text: "Next" })));
  },

  async detail(el, id) {
    const path = projectPath() + "/memories/" + encodeURIComponent(id);
    const { data: memory, etag } = await api(path + "?any_status=1").catch((error) => {
      if (error.status === 404) { // (the server's words name its REST search; a person here has the Search page)
        error.message = `No memory has the id ${id}: find it on the Search page, or under Memories.`;
        error.search = true;
      }
      throw error;
    });
    const gone = ["deleted", "expired"].includes(memory.status);
    const [{ data: hist }, related] = await Promise.all([api(path + "/history"), // (any_status: deleted meanwhile, no 410)
      gone ? Promise.resolve([]) : api(path + "/related?any_status=1").then((r) => r.data.related)]);
    const act = (fn) => async () => { try { await fn(); render(); } catch (e) { note.textContent = e.message; } };
    const note = h("p", { role: "alert", class: "alert-slot" });
    el.append(h("h2", { text: nameOf(memory) }, hookMark(memory)), note);
    if (gone) {
      el.append(h("p", { class: "alert", text: `This memory is ${memory.status}; its history is kept.` }), h("div", { class: "actions" },
        h("button", { onclick: act(() => api(path + "/restore", { method: "POST", body: {} })), text: "Restore" })));
    } else {
      el.append(h("dl", { class: "fields" }, [["Id", memory.id], ["Type", memory.kind], ["Scope", memory.scope],
        ["Status", memory.superseded ? "superseded" : memory.status], ["Importance", memory.importance],
        ["Tags", tags(memory.tags)], ["Summary", memory.summary], ["Accessed", memory.access_count + " times"],
        ["Promoted", memory.promoted ? "yes" : "no"], ["Expires", memory.expires_at || "never"],
        ["Created", `${when(memory.created_at)} by ${memory.created_by || "—"}`],
        ["Updated", `${when(memory.updated_at)} by ${memory.updated_by || "—"}`],
        ...(memory.source ? [["Source", memory.source]] : []),
        ...Object.entries(memory.metadata || {}).map(([k, v]) => ["Meta: " + k, v])]
        .map(([k, v]) => [h("dt", { text: k }), h("dd", {}, v)])),
      h("h3", { text: "Content" }), h("pre", { class: "content", text: memory.content }));
      const edit = h("form", { class: "edit", hidden: true, "aria-label": "Edit memory" },
        field("Title", h("input", { name: "title", value: memory.title })),
        field("Content", h("textarea", { name: "content" }, memory.content)),
        field("Tags (comma-separated)", h("input", { name: "tags", value: memory.tags.join(", ") })),
        field("Type", h("select", { name: "type" }, ui.types.map((k) => h("option", { value: k, selected: memory.kind === k, text: k })))),
        field("Importance", h("input", { name: "importance", type: "number", min: 0, max: 1, step: 0.05, value: memory.importance })),
        field("Lifetime in seconds (empty: long-term)", h("input", { name: "ttl", type: "number", min: 1, step: 1,
          value: memory.ttl_seconds ?? "" })),
        h("div", { class: "actions" }, h("button", { type: "submit", text: "Save changes" })));
      edit.addEventListener("input", () => edit.setAttribute("data-editing", ""));
      edit.addEventListener("submit", (event) => {
        event.preventDefault();
        const v = Object.fromEntries(new FormData(edit));
        const body = { title: v.title, content: v.content, type: v.type, importance: Number(v.importance),
          tags: v.tags.split(",").map((t) => t.trim()).filter(Boolean) };
        if (v.ttl !== String(memory.ttl_seconds ?? "")) body.ttl_seconds = v.ttl === "" ? null : Number(v.ttl); // (a TTL sent restarts its clock)
        act(() => api(path, { method: "PUT", body, headers: { "If-Match": etag } }))();
      });
      const reason = h("input", { name: "reason", placeholder: "why (optional)" });
      const successor = h("textarea", { name: "successor", "aria-label": "Corrected content" });
      el.append(h("div", { class: "actions" },
        h("button", { onclick: () => {
          edit.hidden = !edit.hidden; // an open form is kept from a live refresh from the click on, not from the first key
          if (edit.hidden) edit.removeAttribute("data-editing"); else { edit.setAttribute("data-editing", ""); edit.querySelector("input").focus(); }
        }, text: "Edit" }),
        h("button", { class: "secondary", onclick: act(() => api(path + "/promote", { method: "POST", body: {} })), text: "Promote" }),
        field("Reason", reason),
        h("button", { class: "danger", onclick: act(() => api(path + query({ reason: reason.value }), { method: "DELETE", headers: { "If-Match": etag } })), text: "Delete" })),
        edit,
        h("details", {}, h("summary", { text: "Supersede with a corrected memory" }), successor,
          h("button", { onclick: act(async () => {
            const { data } = await api(path + "/supersede", { method: "POST", body: { content: successor.value } });
            location.hash = "#/memory/" + encodeURIComponent(data.memory.id);
          }), text: "Supersede" })));
      el.append(h("h3", { text: "Relationships" }), related.length ? h("ul", {}, related.map((r) =>
        h("li", {}, `${r.direction === "in" ? "←" : "→"} ${r.relation} `, memoryLink(r.id, r.title || r.summary))))
        : h("p", { class: "note", text: "No relationships." }));
    }
    el.append(h("h3", { text: "History" }), table([["When"], ["Event"], ["By"], ["Changes"], ["Where", "hide-narrow"]],
      hist.history.map((line) => h("tr", { class: "history-line" }, h("td", { text: when(line.ts) }), h("td", { text: line.type }),
        h("td", { text: line.by || "—" }),
        h("td", {}, Object.entries(line.changes).map(([k, [a, b]]) => h("div", { text: `${k}: ${JSON.stringify(a)} → ${JSON.stringify(b)}` })), historyNote(line)),
        h("td", { class: "hide-narrow note", text: `${line.commit ? "commit " + line.commit : "not committed"} · ${line.segment}:${line.offset}` })))));
  },

  async search(el) {
    const s = (views.lastSearch = views.lastSearch || { query: "", mode: "hybrid" });
    const form = h("form", { class: "inline", role: "search" },
      field("Query", h("input", { name: "query", type: "search", value: s.query, required: true, size: 30 })),
      field("Mode", h("select", { name: "mode" }, ["hybrid", "keyword", "vector"].map((m) => h("option", { value: m, selected: s.mode === m, text: m })))),
      h("button", { type: "submit", text: "Search" }));
    form.addEventListener("submit", (event) => { event.preventDefault(); Object.assign(s, Object.fromEntries(new FormData(form))); render(); });
    form.addEventListener("input", () => form.setAttribute("data-editing", "")); // a query being typed is kept from a live refresh
    el.append(h("h2", { text: "Search" }), form);
    if (!s.query) return;
    const { data } = await api(projectPath() + "/memories/search", { method: "POST", body: { query: s.query, mode: s.mode, limit: 25 } });
    el.append(h("p", { class: "note", role: "status", text: `${data.results.length} results` }), ...data.warnings.map((w) => h("p", { class: "note", text: w })),
      h("ol", { class: "results" }, data.results.map((hit) => h("li", { "data-id": hit.id }, memoryLink(hit.id, hit.title || hit.summary),
        " ", tags(hit.tags), h("div", { class: "why", text: `score ${hit.score} — keyword ${hit.keyword_score}, vector ${hit.vector_score}` })))));
  },

  async graph(el, { live } = {}) {
    const { data } = await api(projectPath() + "/graph");
    const drawn = JSON.stringify([data.nodes, data.links]);
    if (live && views.graphDrawn === drawn && document.querySelector("#main [data-view=graph] svg.graph")) return window.KEEP;
    views.graphDrawn = drawn;
    const most = data.nodes.length >= 500 ? "the 500 most linked memories" : `${data.nodes.length} linked memories`;
    el.append(h("h2", { text: `Graph — ${most}, ${data.links.length} relationships` }));
    if (!data.nodes.length) { el.append(h("p", { class: "note", text: "No relationships yet." })); return; }
    const main = document.getElementById("main"), style = getComputedStyle(main);
    const width = main.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const height = Math.max(320, Math.min(720, window.innerHeight - 230));
    el.append(window.drawGraph(data.nodes, data.links, { width: Math.max(280, width), height }));
  },

  async timeline(el) {
    const stamps = [];
    let cursor = null;
    do {
      const { data } = await api(projectPath() + "/events" + query({ limit: 500, cursor }));
      for (const e of data.events) if (stamps[stamps.length - 1] !== e.ts) stamps.push(e.ts);
      cursor = data.next_cursor;
    } while (cursor && stamps.length < 20000);
    el.append(h("h2", { text: "Timeline" }));
    if (!stamps.length) { el.append(h("p", { class: "note", text: "The journal is empty." })); return; }
    const at = Math.min(views.timelineAt ?? stamps.length - 1, stamps.length - 1);
    const slider = h("input", { id: "timeline-slider", type: "range", min: 0, max: stamps.length - 1, value: at });
    const shown = h("output", { id: "timeline-when", for: "timeline-slider" });
    const result = h("div", { id: "timeline-result", "aria-live": "polite" });
    const show = async () => {
      views.timelineAt = Number(slider.value);
      const ts = stamps[views.timelineAt];
      shown.textContent = ts;
      const { data } = await api(projectPath() + "/as_of" + query({ when: ts }));
      if (shown.textContent !== ts) return;
      const live = data.memories.filter((m) => m.status === "live");
      result.replaceChildren(h("p", { text: `${data.as_of}: ${live.length} live memories of ${data.memories.length}` }),
        table([["Memory"], ["Type"], ["Status"], ["Updated", "hide-narrow"]], data.memories.map((m) => h("tr", { "data-id": m.id },
          h("td", {}, memoryLink(m.id, nameOf(m))), h("td", { text: m.kind }), h("td", { class: "status-" + m.status, text: m.status }),
          h("td", { class: "hide-narrow", text: when(m.updated_at) })))));
    };
    slider.addEventListener("input", show);
    el.append(h("label", { for: "timeline-slider" }, `The memory at any of the journal's ${stamps.length} moments`), slider, h("p", {}, "As of ", shown), result);
    await show();
  },

  async settings(el) {
    views.tokenOnly(el);
    const { data } = await api(projectPath() + "/settings");
    el.append(h("h3", { text: "Effective configuration (read-only)" }),
      h("p", { class: "note", text: `Embedder ${data.embedder} (vectors ${data.vector_status}).` }),
      table([["Setting"], ["Value"], ["From"]], data.settings.map((s) => h("tr", {}, h("td", { text: s.key }),
        h("td", { text: JSON.stringify(s.value) }), h("td", { text: s.source })))),
      ...data.ignored.map((line) => h("p", { class: "alert", text: line })));
  },

  tokenOnly(el) {
    const form = h("form", { class: "inline", "aria-label": "Token" },
      field("Bearer token (kept for this tab only)", h("input", { name: "token", type: "password", autocomplete: "off", value: ui.token })),
      h("button", { type: "submit", text: "Use token" }));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      ui.token = new FormData(form).get("token").trim();
      sessionStorage.setItem("eventmem-token", ui.token);
      location.reload();
    });
    el.append(h("h2", { text: "Settings" }), form);
  },
};

window.views = views;
