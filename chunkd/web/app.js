// chunkd's preview page. It lays out a report that chunkd computed (the filter's
// records for one document, as JSONL, and a summary); it never cuts text itself.
// The report comes from `chunkd serve` (POST /api/split) or, in a file written by
// `chunkd preview`, from the JSON in the element #report. Document text is only ever
// put into the page as text nodes (textContent), never parsed as HTML.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const count = new Intl.NumberFormat("en");
  const percent = new Intl.NumberFormat("en", { maximumFractionDigits: 1 });
  const seconds = new Intl.NumberFormat("en", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const tenths = new Intl.NumberFormat("en", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

  /** An element with a class and text (as text, never as HTML). */
  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  const mebibytes = new Intl.NumberFormat("en", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

  /** A size as the server's messages write it. */
  function byteSize(bytes) {
    return bytes >= 1048576 ? `${mebibytes.format(bytes / 1048576)} MiB` : `${count.format(bytes)} bytes`;
  }

  // --- the report being shown ---------------------------------------------------------

  const shown = {
    report: null,
    records: [],
    unit: "",
    toUnits: (offset) => offset, // code-point offset -> UTF-16 index into report.text
    segments: null,              // the text cut at every chunk boundary (see segmentsOf)
    sources: null,               // propositions: each statement's span (see sourcesOf); else null
    selected: -1,
    focus: -1,                   // propositions: the selected chunk's statement pinned (clicked)
    hovered: -1,                 // and the one under the pointer or focus, shown meanwhile
  };

  /** Offsets in records count code points (Python's str); JavaScript strings count
   * UTF-16 units. Returns the conversion, a binary search over the astral characters. */
  function codePointsToUnits(text) {
    const astral = [];
    for (let unit = 0, point = 0; unit < text.length; unit++, point++) {
      const high = text.charCodeAt(unit);
      if (high >= 0xd800 && high <= 0xdbff && unit + 1 < text.length) {
        const low = text.charCodeAt(unit + 1);
        if (low >= 0xdc00 && low <= 0xdfff) {
          astral.push(point);
          unit++;
        }
      }
    }
    if (astral.length === 0) return (offset) => offset;
    return (offset) => offset + lowerBound(astral, offset);
  }

  /** The number of items of a sorted array below `value`. */
  function lowerBound(sorted, value) {
    let low = 0, high = sorted.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (sorted[middle] < value) low = middle + 1; else high = middle;
    }
    return low;
  }

  /** The statements of the propositions strategy's chunks that a span of the document
   * supports, as the document view marks them: {start, end, chunk, item, match}, the
   * chunk's index in the records and the statement's in its propositions. A chunk's own
   * start and end only bound these, and its text is no slice of the document. */
  function sourcesOf(records) {
    const sources = [];
    records.forEach((record, chunk) => record.propositions.forEach(({ start, end, match }, item) => {
      if (start !== null && start < end) sources.push({ start, end, chunk, item, match });
    }));
    return sources;
  }

  /** The document cut at every start and end of `records` (chunks, or the sources of
   * their statements, whose chunk is `chunkOf` one): for each segment its start, end,
   * how many chunks cover it, the first of them (-1: none) and whether only approximate
   * sources cover it. */
  function segmentsOf(records, length, chunkOf = (i) => i) {
    const cuts = new Float64Array(records.length * 2 + 2);
    records.forEach((record, i) => { cuts[2 * i] = record.start; cuts[2 * i + 1] = record.end; });
    cuts[cuts.length - 2] = 0;
    cuts[cuts.length - 1] = length;
    cuts.sort();
    // Chunks by start (children of overlapping parents may start before the previous
    // parent's last children); the chunks covering a point are then a short list.
    const order = records.map((_, i) => i);
    if (records.some((record, i) => i && record.start < records[i - 1].start)) {
      order.sort((a, b) => records[a].start - records[b].start || a - b);
    }
    const starts = [], ends = [], cover = [], owner = [], approximate = [];
    let next = 0, active = [];
    for (let k = 0; k + 1 < cuts.length; k++) {
      const from = cuts[k], to = cuts[k + 1];
      if (from === to) continue;
      while (next < order.length && records[order[next]].start <= from) active.push(order[next++]);
      active = active.filter((i) => records[i].end > from);
      const chunks = active.map(chunkOf);
      starts.push(from); ends.push(to); cover.push(new Set(chunks).size);
      owner.push(chunks.length ? chunks.reduce((a, b) => Math.min(a, b)) : -1);
      approximate.push(active.length > 0 && active.every((i) => records[i].match === "approximate"));
    }
    return { starts, ends, cover, owner, approximate };
  }

  // --- the document, chunk by chunk (built a page at a time, as it scrolls into view) --

  const view = $("view");
  const PAGE_POINTS = 12000; // code points a page of the view holds at most,
  const PAGE_PIECES = 1000;  // and pieces (spans): tiny chunks make many
  let pages = [];            // {pieces: [[segment, from, to], ...], element, built}
  let pageObserver = null;

  function buildView() {
    if (pageObserver) pageObserver.disconnect();
    view.replaceChildren();
    pages = [];
    const { starts, ends } = shown.segments;
    let page = { pieces: [], points: 0 };
    for (let s = 0; s < starts.length; s++) {
      for (let from = starts[s]; from < ends[s];) {
        const to = Math.min(ends[s], from + PAGE_POINTS - page.points);
        page.pieces.push([s, from, to]);
        page.points += to - from;
        from = to;
        if (page.points >= PAGE_POINTS || page.pieces.length >= PAGE_PIECES) {
          pages.push(page);
          page = { pieces: [], points: 0 };
        }
      }
    }
    if (page.pieces.length) pages.push(page);
    const metrics = textMetrics();
    pageObserver = new IntersectionObserver(onPagesSeen, { root: view, rootMargin: "1200px 0px" });
    for (const [number, page] of pages.entries()) {
      page.element = element("div", "page");
      page.element.dataset.page = number;
      page.element.style.height = `${estimatedHeight(page, metrics)}px`;
      page.built = false;
      view.append(page.element);
      pageObserver.observe(page.element);
    }
  }

  /** The width of a character and the height of a line in the view, for the height of
   * pages not built yet. */
  function textMetrics() {
    const probe = element("span", "", "0".repeat(100));
    view.append(probe);
    const width = probe.getBoundingClientRect().width / 100 || 8;
    probe.remove();
    const style = getComputedStyle(view);
    const line = parseFloat(style.lineHeight) || 22;
    const inner = view.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    return { perLine: Math.max(20, Math.floor(inner / width)), line };
  }

  function estimatedHeight(page, metrics) {
    const text = shown.report.text, units = shown.toUnits;
    const first = page.pieces[0], last = page.pieces[page.pieces.length - 1];
    const slice = text.slice(units(first[1]), units(last[2]));
    let lines = 0;
    for (let at = 0; at <= slice.length;) {
      let end = slice.indexOf("\n", at);
      if (end < 0) end = slice.length;
      lines += Math.max(1, Math.ceil((end - at) / metrics.perLine));
      at = end + 1;
    }
    return lines * metrics.line;
  }

  function onPagesSeen(entries) {
    for (const entry of entries) {
      const page = pages[entry.target.dataset.page];
      if (entry.isIntersecting) fillPage(page);
      else if (page.built) emptyPage(page, entry.boundingClientRect.height);
    }
  }

  function fillPage(page) {
    if (page.built) return;
    const text = shown.report.text, units = shown.toUnits;
    const { cover, owner, approximate } = shown.segments;
    const selected = selectedRanges(), focused = focusedRanges();
    const spans = page.pieces.map(([s, from, to]) => {
      const kind = cover[s] === 0 ? "gap" : cover[s] > 1 ? "overlap" : `c${owner[s] % 2}`;
      const span = element("span", `seg ${kind}`, text.slice(units(from), units(to)));
      span.dataset.seg = s;
      span.dataset.start = from;
      span.dataset.end = to;
      if (shown.sources) {
        // Characters no statement stands for (white space aside) stand out.
        if (cover[s] === 0 && /\S/.test(span.textContent)) span.classList.add("uncovered");
        if (approximate[s]) span.classList.add("approx");
        if (within(s, focused)) span.classList.add("focus");
      }
      if (within(s, selected)) span.classList.add("sel");
      return span;
    });
    page.element.replaceChildren(...spans);
    page.element.style.height = "";
    page.built = true;
  }

  /** Far out of sight: keep the page's height, drop its nodes. */
  function emptyPage(page, height) {
    page.element.style.height = `${height}px`;
    page.element.replaceChildren();
    page.built = false;
  }

  /** The segments [first, last) from code point `start` to `end` (both cuts). */
  function segmentRange(start, end) {
    const { starts } = shown.segments;
    return [lowerBound(starts, start), lowerBound(starts, end)];
  }

  /** The segments of the selected chunk, as ranges [first, last): its own range, or
   * (propositions) its statements' sources. */
  function selectedRanges() {
    if (shown.selected < 0) return [];
    const record = shown.records[shown.selected];
    if (!shown.sources) return [segmentRange(record.start, record.end)];
    return record.propositions.filter((p) => p.start !== null).map((p) => segmentRange(p.start, p.end));
  }

  /** The segments of the statement shown (hovered, else pinned), as ranges. */
  function focusedRanges() {
    const item = shown.hovered >= 0 ? shown.hovered : shown.focus;
    const found = item >= 0 && shown.selected >= 0 ? shown.records[shown.selected].propositions[item] : null;
    return found && found.start !== null ? [segmentRange(found.start, found.end)] : [];
  }

  function within(s, ranges) {
    return ranges.some(([first, last]) => s >= first && s < last);
  }

  function markSelection() {
    for (const span of view.querySelectorAll(".sel")) span.classList.remove("sel");
    for (const span of view.querySelectorAll(".focus")) span.classList.remove("focus");
    const selected = selectedRanges(), focused = focusedRanges();
    for (const span of view.querySelectorAll(".seg")) {
      const s = Number(span.dataset.seg);
      if (within(s, selected)) span.classList.add("sel");
      if (within(s, focused)) span.classList.add("focus");
    }
  }

  function scrollViewTo(index) {
    scrollViewToOffset(shown.records[index].start);
  }

  /** Bring the line of the document that holds code point `at` into sight. */
  function scrollViewToOffset(at) {
    if (view.hidden || !pages.length) return;
    const segment = Math.max(0, lowerBound(shown.segments.starts, at + 1) - 1);
    const page = pages.find((page) => page.pieces[page.pieces.length - 1][0] >= segment);
    fillPage(page);
    const span = [...page.element.querySelectorAll(`[data-seg="${segment}"]`)]
      .find((span) => Number(span.dataset.end) > at) || page.element.querySelector(`[data-seg="${segment}"]`);
    if (!span) return;
    let box = span.getBoundingClientRect();
    if (span.firstChild) {  // the line of `at` itself, in a long segment
      const range = document.createRange();
      const into = shown.toUnits(at) - shown.toUnits(Number(span.dataset.start));
      range.setStart(span.firstChild, Math.min(span.firstChild.length, Math.max(0, into)));
      const rects = range.getClientRects();
      if (rects.length) box = rects[0];
    }
    // Scroll the view alone (scrollIntoView would scroll the window too, on a narrow
    // screen away from the list in use).
    const offset = box.top - view.getBoundingClientRect().top;
    if (offset < 0 || offset > view.clientHeight - 40) view.scrollTop += offset - view.clientHeight / 4;
  }

  view.addEventListener("click", (event) => {
    const span = event.target.closest(".seg");
    if (!span) return;
    const from = Number(span.dataset.start), to = Number(span.dataset.end);
    const covering = [];
    for (const [i, record] of (shown.sources || shown.records).entries()) {
      const chunk = shown.sources ? record.chunk : i;
      if (record.start <= from && to <= record.end && !covering.includes(chunk)) covering.push(chunk);
    }
    if (!covering.length) return;
    // In an overlap, clicking again selects the next chunk that covers it.
    const at = covering.indexOf(shown.selected);
    const chunk = covering[(at + 1) % covering.length];
    select(chunk, { view: false });
    if (shown.sources) {  // and the statement drawn from what was clicked
      pin(shown.sources.find((source) => source.chunk === chunk && source.start <= from && to <= source.end).item);
    }
  });

  // --- the list of chunks (only the rows in sight exist) -------------------------------

  const list = $("list");
  const space = $("list-space");
  const ROW = parseFloat(getComputedStyle(document.documentElement).getPropertyValue("--row")) || 30;
  const MAX_SPACE = 8e6; // px; browsers cap an element's height near 16-33 million

  function listScale() {
    const full = shown.records.length * ROW, sight = list.clientHeight;
    return full <= MAX_SPACE ? 1 : (MAX_SPACE - sight) / Math.max(1, full - sight);
  }

  function renderList() {
    const records = shown.records, scale = listScale();
    space.style.height = `${Math.min(records.length * ROW, MAX_SPACE)}px`;
    const top = list.scrollTop / scale / ROW;            // the row at the top, fractional
    const first = Math.max(0, Math.floor(top) - 5);
    const last = Math.min(records.length, Math.ceil(top + list.clientHeight / ROW) + 5);
    const rows = [];
    for (let i = first; i < last; i++) {
      const record = records[i];
      const row = element("div", `row ${i % 2 ? "odd" : "even"}`);
      row.id = `row-${i}`;
      row.setAttribute("role", "option");
      row.setAttribute("aria-selected", String(i === shown.selected));
      row.dataset.index = i;
      row.style.top = `${list.scrollTop + (i - top) * ROW}px`;
      const tokens = record.tokens !== undefined && shown.unit !== "tokens"
        ? ` · ${count.format(record.tokens)} tok` : "";
      row.append(element("span", "num", `#${record.index}`),
                 element("span", "range", `${record.start}–${record.end}`),
                 element("span", "len", `${count.format(record.length)} ${shown.unit}${tokens}`),
                 element("span", "text", opening(shown.sources && record.title !== null
                   ? `${record.title} · ${record.text}` : record.text)));
      rows.push(row);
    }
    space.replaceChildren(...rows);
    if (shown.selected >= first && shown.selected < last) {
      list.setAttribute("aria-activedescendant", `row-${shown.selected}`);
    } else {
      list.removeAttribute("aria-activedescendant");
    }
  }

  /** The start of a chunk's text on one line, not ending inside a surrogate pair. */
  function opening(text) {
    let end = Math.min(text.length, 160);
    if (end < text.length && /[\ud800-\udbff]/.test(text[end - 1])) end--;
    return text.slice(0, end).replace(/\s+/g, " ");
  }

  let listFrame = 0;
  list.addEventListener("scroll", () => {
    if (!listFrame) listFrame = requestAnimationFrame(() => { listFrame = 0; renderList(); });
  });
  new ResizeObserver(() => renderList()).observe(list);

  function scrollListTo(index) {
    const scale = listScale(), sight = list.clientHeight;
    const top = list.scrollTop / scale;
    // scrollTop is whole pixels: round so that the row stays whole when scaled.
    if (index * ROW < top) list.scrollTop = Math.floor(index * ROW * scale);
    else if ((index + 1) * ROW > top + sight) list.scrollTop = Math.ceil(((index + 1) * ROW - sight) * scale);
  }

  list.addEventListener("click", (event) => {
    const row = event.target.closest(".row");
    if (row) select(Number(row.dataset.index));
  });

  list.addEventListener("keydown", (event) => {
    const last = shown.records.length - 1, page = Math.max(1, Math.floor(list.clientHeight / ROW) - 1);
    const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page };
    let target;
    if (event.key in moves) target = Math.max(0, shown.selected) + moves[event.key];
    else if (event.key === "Home") target = 0;
    else if (event.key === "End") target = last;
    else return;
    event.preventDefault();
    if (last >= 0) select(Math.min(last, Math.max(0, target)));
  });

  // --- the selected chunk ---------------------------------------------------------------

  function select(index, { view: moveView = true } = {}) {
    shown.selected = index;
    shown.focus = shown.hovered = -1;
    if (index >= 0) {
      scrollListTo(index);
      if (moveView) scrollViewTo(index);
    }
    renderList();
    markSelection();
    markCurveSelection();
    renderDetails();
  }

  function renderDetails() {
    const details = $("details");
    if (shown.selected < 0) {
      details.replaceChildren(element("p", "muted", shown.records.length
        ? "Select a chunk in the list or in the document." : "No chunk."));
      return;
    }
    const record = shown.records[shown.selected];
    if (shown.sources) {
      renderStatements(details, record);
      return;
    }
    const previous = shown.records[shown.selected - 1];
    const facts = [
      ["Index", String(record.index)],
      ["Range", `${record.start}–${record.end} (${count.format(record.end - record.start)} code points)`],
      ["Length", `${count.format(record.length)} ${shown.unit}`],
    ];
    if (record.tokens !== undefined) facts.push(["Tokens", tokensFact(record)]);
    facts.push(["Estimated tokens", record.estimated_tokens !== undefined
      ? count.format(record.estimated_tokens) : "—"]);
    if (record.headings !== undefined) {
      facts.push(["Heading path", record.headings.length ? record.headings.join(" › ") : "(none)"]);
    }
    if (record.pages !== undefined) {
      facts.push(["Pages", record.pages[0] === record.pages[1]
        ? String(record.pages[0]) : `${record.pages[0]}–${record.pages[1]}`]);
    }
    if (record.parent !== undefined) {
      facts.push(["Parent", `#${record.parent.index}, ${record.parent.start}–${record.parent.end}`]);
    }
    const shared = previous
      ? Math.max(0, Math.min(previous.end, record.end) - Math.max(previous.start, record.start)) : 0;
    facts.push(["Shared with the previous", shared
      ? `${count.format(shared)} code points` : "nothing"]);
    details.replaceChildren(factList(facts), element("pre", "chunk-text", record.text));
  }

  /** A chunk's exact tokens, and the tokenizer that counts them. */
  function tokensFact(record) {
    const tokens = element("span", "one-line");
    tokens.append(`${count.format(record.tokens)} (`, unitName(shown.report.tokenizer), ")");
    return tokens;
  }

  const MATCHES = { exact: "exact", approximate: "approximate", null: "unsupported" };

  /** A propositions chunk: its title and summary, its counts, and its statements, each
   * with the span of the document it was drawn from (hover or focus one to see that
   * span in the document, click it to keep it there and scroll to it). */
  function renderStatements(details, record) {
    const items = record.propositions;
    const counted = (match) => items.filter((p) => p.match === match).length;
    const facts = [
      ["Index", String(record.index)],
      ["Sources", record.start < record.end
        ? `within ${record.start}–${record.end} (${count.format(record.end - record.start)} code points)` : "none"],
      ["Length", `${count.format(record.length)} ${shown.unit}`],
    ];
    if (record.tokens !== undefined) facts.push(["Tokens", tokensFact(record)]);
    facts.push(["Statements", `${count.format(items.length)}: ${count.format(counted("exact"))} exact, `
      + `${count.format(counted("approximate"))} approximate, ${count.format(counted(null))} unsupported`]);
    const title = record.title === null
      ? element("p", "chunk-title muted", "No title: the LLM gave this passage no propositions, so it is kept as its own text.")
      : element("h3", "chunk-title", record.title);
    const parts = [title];
    if (record.summary !== null) parts.push(element("p", "chunk-summary", record.summary));
    const list = element("ol", "statements");
    items.forEach((item, k) => {
      const entry = element("li", `statement ${MATCHES[item.match]}`);
      entry.dataset.item = k;
      entry.tabIndex = 0;
      const where = item.start === null ? "no source in the document"
        : `${item.start}–${item.end} ${item.match}${item.score !== undefined ? ` (${item.score})` : ""}`;
      entry.append(element("span", "statement-text", item.text), element("span", "statement-source", where));
      list.append(entry);
    });
    parts.push(factList(facts), list);
    details.replaceChildren(...parts);
    markStatements();
  }

  function markStatements() {
    for (const entry of $("details").querySelectorAll(".statement")) {
      const k = Number(entry.dataset.item);
      entry.classList.toggle("pinned", k === shown.focus);
      entry.classList.toggle("hovered", k === shown.hovered);
    }
  }

  /** Statement `item` of the selected chunk under the pointer or focus (-1: none). */
  function hover(item) {
    if (item === shown.hovered) return;
    shown.hovered = item;
    markSelection();
    markStatements();
  }

  /** Keep statement `item` shown (again: no longer), its source in sight. */
  function pin(item) {
    shown.focus = item === shown.focus ? -1 : item;
    const found = shown.records[shown.selected].propositions[item];
    if (shown.focus >= 0 && found.start !== null) scrollViewToOffset(found.start);
    markSelection();
    markStatements();
  }

  const detailsBox = $("details");
  const statementOf = (event) => {
    const entry = event.target.closest && event.target.closest(".statement");
    return entry ? Number(entry.dataset.item) : -1;
  };
  detailsBox.addEventListener("mouseover", (event) => hover(statementOf(event)));
  detailsBox.addEventListener("mouseleave", () => hover(-1));
  detailsBox.addEventListener("focusin", (event) => hover(statementOf(event)));
  detailsBox.addEventListener("focusout", () => hover(-1));
  detailsBox.addEventListener("click", (event) => {
    const item = statementOf(event);
    if (item >= 0) pin(item);
  });
  detailsBox.addEventListener("keydown", (event) => {
    const item = statementOf(event);
    if (item >= 0 && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); pin(item); }
  });

  /** A tokenizer's identity as the page shows it: a file's name and the start of its
   * SHA-256 ("model/tokenizer.json@be50c362"), so that it fits a card; the whole
   * identity is in the records and the tooltips. */
  function tokenizerName(identity) {
    const [name, digest] = identity.split("@sha256:");
    return digest === undefined ? identity : `${name}@${digest.slice(0, 8)}`;
  }

  /** A tokenizer's name in a card: on one line, cut with an ellipsis where the card is
   * narrower (a model folder's name can be long), the whole identity in its tooltip. */
  function unitName(identity) {
    const name = element("span", "unit-name", tokenizerName(identity));
    name.title = identity;
    return name;
  }

  /** Facts as a definition list; a value is text or an element. */
  function factList(facts) {
    const list = element("dl", "facts");
    for (const [term, value] of facts) {
      const dt = element("dt", "", term), dd = element("dd");
      dd.append(value);
      dd.dataset.fact = term;
      list.append(dt, dd);
    }
    return list;
  }

  // --- totals and the histogram -----------------------------------------------------------

  function renderTotals() {
    const { summary, settings } = shown.report;
    const unit = shown.unit;
    const tiles = [["Chunks", count.format(summary.chunks), "chunks"]];
    if (summary.chunks) {
      tiles.push(["Length", count.format(summary.median), `median ${unit}; min `
        + `${count.format(summary.min)}, max ${count.format(summary.max)}, size ${count.format(settings.size)}`]);
    }
    if (summary.tokens !== null) {
      tiles.push(["Tokens", count.format(summary.tokens), [unitName(shown.report.tokenizer), " tokens in all chunks"]]);
    }
    if (summary.estimated_tokens !== null) {
      tiles.push(["Estimated tokens", count.format(summary.estimated_tokens), "estimated tokens in all chunks"]);
    }
    if (summary.statements) {  // propositions: what the statements stand for, not an overlap
      const { exact, approximate, unsupported } = summary.statements;
      tiles.push(["Statements", count.format(exact + approximate + unsupported), `${count.format(exact)} exact, `
        + `${count.format(approximate)} approximate, ${count.format(unsupported)} unsupported`]);
      const share = summary.visible ? summary.uncovered / summary.visible * 100 : 0;
      tiles.push(["Uncovered", `${percent.format(share)} %`, `of the ${count.format(summary.visible)} characters `
        + "(white space aside) in no statement's source"]);
    } else {
      const share = summary.code_points ? summary.repeated / summary.code_points * 100 : 0;
      tiles.push(["Repeated", `${count.format(summary.repeated)}`, `code points repeated by the overlap, `
        + `${percent.format(share)} % of ${count.format(summary.code_points)}`]);
    }
    $("totals").replaceChildren(...tiles.map(([name, value, label]) => {
      const tile = element("div", "stat");
      tile.dataset.fact = name;
      const caption = element("span", "label");
      caption.append(...[label].flat());
      if (typeof label === "string") caption.title = label;
      tile.append(element("span", "value", value), caption);
      return tile;
    }));
    const notes = shown.report.notes || [];
    $("notes").replaceChildren(...notes.map((line) => element("li", "", line)));
    $("notes").hidden = !notes.length;
    renderHistogram();
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** How many chunks have each length, against the size (a dashed line). */
  function renderHistogram() {
    const box = $("histogram");
    if (!shown.records.length) { box.replaceChildren(); return; }
    const size = shown.report.settings.size;
    const top = Math.max(size, shown.report.summary.max);
    const bins = Math.min(30, top + 1);  // over the lengths 0 to top, both included
    const width = (top + 1) / bins, counts = new Array(bins).fill(0);
    for (const { length } of shown.records) counts[Math.min(bins - 1, Math.floor(length / width))]++;
    const most = counts.reduce((a, b) => Math.max(a, b));
    const W = 480, H = 64, left = 4, bottom = 12, plot = H - bottom - 12;
    const picture = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": `Chunk lengths from 0 to ${top} ${shown.unit}; the size is ${size}` });
    const step = (W - 2 * left) / bins;
    counts.forEach((n, i) => {
      if (!n) return;
      const height = Math.max(1, n / most * plot);
      const low = Math.ceil(i * width), high = Math.ceil((i + 1) * width) - 1;
      const bar = svg("rect", { class: low > size ? "bar over" : "bar", x: left + i * step + 0.5,
        y: H - bottom - height, width: Math.max(1, step - 1), height });
      const lengths = low === high ? `${low}` : `${low}–${high}`;
      bar.append(svg("title", {}, `${lengths} ${shown.unit}: ${count.format(n)} chunks`));
      picture.append(bar);
    });
    const x = left + (size + 1) / (top + 1) * (W - 2 * left);  // lengths up to the size on its left
    picture.append(svg("line", { class: "limit", x1: x, x2: x, y1: 4, y2: H - bottom }),
      svg("text", { x: left, y: H - 2 }, "0"),
      svg("text", { x: Math.min(x + 3, W - 60), y: H - 2 }, `size ${size}`),
      svg("text", { x: left, y: 10 }, `${count.format(most)} chunks`));
    box.replaceChildren(picture);
  }

  // --- the semantic strategy's distance curve ------------------------------------------
  // Greg Kamradt's plot: the distance between neighbouring sentence windows against the
  // boundary between the sentences, the threshold, the cuts and the chunks' spans. Its
  // x axis counts boundaries: point i (the distance before sentence i + 1) sits at x = i,
  // the document's first sentence starts at x = -1 and its end is at x = points.

  const curveBox = $("curve"), curvePlot = $("curve-plot");
  const decimals = new Intl.NumberFormat("en", { minimumFractionDigits: 3, maximumFractionDigits: 3 });
  const curveState = { anchors: [], cut: new Set(), cursor: -1 };
  const MAX_DOTS = 4000;  // more points than this: a dot only above the threshold
  const RULES = {  // how each rule's threshold reads (LangChain's SemanticChunker's rules)
    percentile: (x) => `percentile ${x}`,
    standard_deviation: (x) => `mean + ${x} × standard deviation`,
    interquartile: (x) => `mean + ${x} × interquartile range`,
    gradient: (x) => `percentile ${x} of the gradient`,
  };

  function curveValues(curve) {
    return curve.gradients || curve.points.map((point) => point[1]);
  }

  /** The x of code point `at`: the anchors (the first sentence's start, each point's
   * offset, the document's end) are at -1, 0, 1, ...; between them, in proportion. */
  function curveX(at) {
    const anchors = curveState.anchors, k = lowerBound(anchors, at);
    if (k === 0) return -1;
    if (k >= anchors.length) return anchors.length - 2;
    const low = anchors[k - 1], high = anchors[k];
    return k - 2 + (high > low ? (at - low) / (high - low) : 1);
  }

  function thresholdText(curve) {
    return curve.threshold === null ? "no threshold (too few distances for the rule)"
      : `${RULES[curve.rule](curve.amount)} = ${decimals.format(curve.threshold)}`;
  }

  /** What a point says on hover, and in the line under the curve. */
  function pointText(curve, i) {
    const [at, distance] = curve.points[i], values = curveValues(curve);
    const cut = curveState.cut.has(i);
    const above = curve.threshold !== null && values[i] > curve.threshold;
    const gradient = curve.gradients ? `, gradient ${decimals.format(values[i])}` : "";
    const sentence = opening(shown.report.text.slice(shown.toUnits(at), shown.toUnits(at) + 80)).trim();
    const verdict = cut ? "above the threshold: cut here"
      : above ? "above the threshold, not cut: a chunk under the minimum joined its neighbour"
      : "not above the threshold";
    return `Boundary ${count.format(i + 1)} of ${count.format(values.length)}, before code point `
      + `${count.format(at)} (“${sentence}…”): distance ${decimals.format(distance)}${gradient}; ${verdict}`;
  }

  function renderCurve() {
    const curve = shown.report && shown.report.curve;
    curveBox.hidden = !curve || view.hidden;
    if (curveBox.hidden) return;
    const values = curveValues(curve), n = values.length;
    curveState.anchors = [curve.first, ...curve.points.map((point) => point[0]), shown.report.summary.code_points];
    curveState.cut = new Set(curve.cuts.map((c) => c[1]));
    const meaning = curve.cuts.filter((c) => c[1] !== null).length;
    $("curve-caption").textContent = `Distance between neighbouring sentence windows (${curve.gradients
      ? "gradient" : "cosine"}) · threshold ${thresholdText(curve)} · ${count.format(curve.cuts.length)} cuts: `
      + `${count.format(meaning)} where it is above the threshold, ${count.format(curve.cuts.length - meaning)} at the maximum size`;
    const W = Math.max(320, curvePlot.clientWidth), H = 150;
    const left = 44, right = 10, top = 10, bottom = 20;
    const finite = values.filter(Number.isFinite);  // (no spread: a long document has 100,000s)
    const least = finite.reduce((a, b) => Math.min(a, b), Infinity);
    const most = finite.reduce((a, b) => Math.max(a, b), -Infinity);
    const high = Math.max(curve.threshold ?? 0, most, 1e-9) * 1.08;
    const low = Math.min(0, least);
    const sx = (x) => left + (x + 1) / (n + 1) * (W - left - right);
    const sy = (y) => top + (high - y) / (high - low) * (H - top - bottom);
    const title = svg("title", { id: "curve-title" }, "Distance curve of the semantic split");
    const desc = svg("desc", { id: "curve-desc" }, n
      ? `${count.format(n)} distances between neighbouring sentence windows, from `
        + `${decimals.format(least)} to ${decimals.format(most)}; `
        + `threshold ${thresholdText(curve)}; ${count.format(curve.cuts.length)} cuts, `
        + `${count.format(meaning)} where it is above the threshold.`
        + (n > MAX_DOTS ? ` Dots mark only the distances above the threshold.` : "")
        + " Arrow keys move along the "
        + "boundaries, Enter shows one in the document."
      : "No distances: the document has fewer than two sentences.");
    const picture = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, tabindex: 0,
      "aria-labelledby": "curve-title curve-desc" });
    picture.append(title, desc);
    const spans = svg("g", { class: "spans" });
    shown.records.forEach((record, i) => {
      const x1 = sx(curveX(record.start)), x2 = sx(curveX(record.end));
      const rect = svg("rect", { class: `span c${i % 2}`, x: x1, y: top, width: Math.max(1, x2 - x1),
        height: H - top - bottom, "data-index": i });
      rect.append(svg("title", {}, `chunk ${record.index}: ${record.start}–${record.end}, `
        + `${count.format(record.length)} ${shown.unit}`));
      spans.append(rect);
    });
    picture.append(spans);
    const axis = svg("g", { class: "axis" });
    axis.append(svg("line", { x1: left, x2: W - right, y1: sy(low), y2: sy(low) }),
      svg("text", { x: left - 4, y: sy(high) + 8, "text-anchor": "end" }, decimals.format(high)),
      svg("text", { x: left - 4, y: sy(low), "text-anchor": "end" }, decimals.format(low)),
      svg("text", { x: left, y: H - 4 }, "sentence boundaries →"),
      svg("text", { x: W - right, y: H - 4, "text-anchor": "end" }, count.format(n)));
    picture.append(axis);
    if (curve.threshold !== null) {
      const y = sy(curve.threshold);
      picture.append(svg("line", { class: "threshold", x1: left, x2: W - right, y1: y, y2: y,
        "data-threshold": curve.threshold }, undefined),
        svg("text", { class: "threshold-label", x: W - right - 2, y: y - 4, "text-anchor": "end" },
          thresholdText(curve)));
    }
    for (const [at, point] of curve.cuts) {
      const x = sx(curveX(at));
      const mark = svg("line", { class: point === null ? "cut size" : "cut meaning", x1: x, x2: x,
        y1: top, y2: H - bottom, "data-at": at });
      mark.append(svg("title", {}, point === null
        ? `cut at code point ${count.format(at)}: the group was over the size`
        : `cut at code point ${count.format(at)}: distance ${decimals.format(curve.points[point][1])} above the threshold`));
      picture.append(mark);
    }
    if (n) {
      const line = values.map((v, i) => Number.isFinite(v) ? `${sx(i).toFixed(1)},${sy(v).toFixed(1)}` : "").filter(Boolean);
      picture.append(svg("polyline", { class: "values", points: line.join(" ") }));
    }
    const points = svg("g", { class: "points" });
    values.forEach((v, i) => {
      const above = curve.threshold !== null && v > curve.threshold;
      if (!Number.isFinite(v) || (n > MAX_DOTS && !above)) return;
      const dot = svg("circle", { class: `point${above ? " above" : ""}${above && !curveState.cut.has(i) ? " joined" : ""}`,
        cx: sx(i), cy: sy(v), r: 2.5, "data-point": i, "data-at": curve.points[i][0], "data-value": v });
      dot.append(svg("title", {}, pointText(curve, i)));
      points.append(dot);
    });
    picture.append(svg("line", { class: "cursor", x1: 0, x2: 0, y1: top, y2: H - bottom, visibility: "hidden" }), points);
    curveState.scale = { sx, n, left, right, W };
    curvePlot.replaceChildren(picture);
    markCurveSelection();
    showCursor(curveState.cursor < n ? curveState.cursor : -1);
  }

  function markCurveSelection() {
    if (curveBox.hidden) return;
    for (const rect of curvePlot.querySelectorAll(".span")) {
      rect.classList.toggle("sel", Number(rect.dataset.index) === shown.selected);
    }
  }

  /** Point i under the cursor (its numbers in the line under the curve); -1: none. */
  function showCursor(i) {
    curveState.cursor = i;
    const cursor = curvePlot.querySelector(".cursor");
    if (!cursor) return;
    if (i < 0) {
      cursor.setAttribute("visibility", "hidden");
      $("curve-readout").textContent = curveState.scale.n
        ? "Point at the curve for a boundary's numbers; click it to see it in the document." : "";
      return;
    }
    const x = curveState.scale.sx(i);
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
    $("curve-readout").textContent = pointText(shown.report.curve, i);
  }

  /** The point nearest the mouse. */
  function pointAt(event) {
    const picture = curvePlot.querySelector("svg"), { sx, n, left, right, W } = curveState.scale;
    if (!picture || !n) return -1;
    const box = picture.getBoundingClientRect();
    const x = (event.clientX - box.left) * W / box.width;
    const i = Math.round((x - left) / (W - left - right) * (n + 1) - 1);
    return Math.abs(sx(Math.min(n - 1, Math.max(0, i))) - x) < 40 ? Math.min(n - 1, Math.max(0, i)) : -1;
  }

  /** Show boundary i in the document: select its chunk, scroll to its sentence. */
  function goToPoint(i) {
    const at = shown.report.curve.points[i][0];
    const index = shown.records.findIndex((record) => record.start <= at && at < record.end);
    if (index >= 0) select(index, { view: false });
    scrollViewToOffset(at);
    showCursor(i);
  }

  curvePlot.addEventListener("mousemove", (event) => showCursor(pointAt(event)));
  curvePlot.addEventListener("mouseleave", () => showCursor(-1));
  curvePlot.addEventListener("click", (event) => {
    const i = pointAt(event);
    if (i >= 0) { goToPoint(i); return; }
    const rect = event.target.closest(".span");
    if (rect) select(Number(rect.dataset.index));
  });
  curvePlot.addEventListener("keydown", (event) => {
    const n = curveState.scale ? curveState.scale.n : 0;
    if (!n) return;
    const moves = { ArrowRight: 1, ArrowLeft: -1 };
    if (event.key in moves) {
      event.preventDefault();
      showCursor(Math.min(n - 1, Math.max(0, curveState.cursor + moves[event.key])));
    } else if ((event.key === "Enter" || event.key === " ") && curveState.cursor >= 0) {
      event.preventDefault();
      goToPoint(curveState.cursor);
    }
  });
  new ResizeObserver(() => { if (!curveBox.hidden) renderCurve(); }).observe(curvePlot);

  // --- Copy JSONL, Download JSONL ------------------------------------------------------

  function status(text) { $("action-status").textContent = text; }

  $("copy").addEventListener("click", async () => {
    const jsonl = shown.report.jsonl;
    try {
      await navigator.clipboard.writeText(jsonl);
    } catch {
      const scratch = element("textarea");
      scratch.value = jsonl;
      document.body.append(scratch);
      scratch.select();
      const copied = document.execCommand("copy");
      scratch.remove();
      if (!copied) { status("The browser refused to copy; use Download JSONL."); return; }
    }
    status(`Copied ${count.format(shown.records.length)} records.`);
  });

  $("download").addEventListener("click", () => {
    const doc = shown.report.doc;
    const base = typeof doc === "string" ? doc.split(/[\\/]/).pop() : "document";
    const link = element("a");
    link.href = URL.createObjectURL(new Blob([shown.report.jsonl], { type: "application/x-ndjson" }));
    link.download = `${base}.chunks.jsonl`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  });

  // --- showing a report -------------------------------------------------------------------

  function show(report) {
    shown.report = report;
    shown.records = report.jsonl ? report.jsonl.replace(/\n$/, "").split("\n").map((line) => JSON.parse(line)) : [];
    shown.unit = report.settings.unit;
    shown.toUnits = codePointsToUnits(report.text);
    shown.sources = report.fields.includes("propositions") ? sourcesOf(shown.records) : null;
    shown.segments = shown.sources
      ? segmentsOf(shown.sources, report.summary.code_points, (i) => shown.sources[i].chunk)
      : segmentsOf(shown.records, report.summary.code_points);
    $("legend-chunks").hidden = Boolean(shown.sources);
    $("legend-sources").hidden = !shown.sources;
    shown.selected = -1;
    curveState.cursor = -1;
    showTab("view");
    buildView();
    view.scrollTop = 0;
    list.scrollTop = 0;
    renderTotals();
    select(shown.records.length ? 0 : -1, { view: false });
    $("copy").disabled = $("download").disabled = !shown.records.length;
  }

  function showMessage(text) {
    const message = $("message");
    message.textContent = text;
    message.hidden = !text;
  }

  /** A report's settings in a line; tokens name the tokenizer that counts them. */
  function describe(report) {
    const settings = report.settings;
    const unit = settings.unit === "tokens" ? `tokens (${tokenizerName(report.tokenizer)})` : settings.unit;
    const overlap = settings.overlap ? `, overlap ${count.format(settings.overlap)}` : ", no overlap";
    const parents = settings.parent_size === undefined ? ""
      : `, parents of ${count.format(settings.parent_size)} (overlap ${count.format(settings.parent_overlap)})`;
    return `${settings.strategy}, ${count.format(settings.size)} ${unit}${overlap}${parents}`;
  }

  function showTab(name) {
    const editing = name === "edit";
    $("editor").hidden = !editing;
    view.hidden = editing;
    $("tab-edit").setAttribute("aria-selected", String(editing));
    $("tab-view").setAttribute("aria-selected", String(!editing));
    $("tab-view").disabled = !shown.report;
    renderCurve();
  }

  $("tab-edit").addEventListener("click", () => { showTab("edit"); $("editor").focus(); });
  $("tab-view").addEventListener("click", () => { showTab("view"); view.focus(); });
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("keydown", (event) => {
      if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
      const other = tab.id === "tab-edit" ? $("tab-view") : $("tab-edit");
      if (!other.disabled && !other.hidden) { other.click(); other.focus(); }
    });
  }

  // --- a file written by `chunkd preview` -----------------------------------------------

  const embedded = $("report");
  if (embedded) {
    const report = JSON.parse(embedded.textContent);
    const name = typeof report.doc === "string" ? report.doc : "stdin";
    document.title = `${name} — chunkd preview`;
    $("title").textContent = "preview";
    const fixed = $("fixed-settings");
    fixed.append(element("strong", "", name), ` · ${describe(report)} · ${report.chunker}`);
    fixed.hidden = false;
    $("tab-edit").hidden = $("open-file").hidden = true;
    show(report);
    return;
  }

  // --- `chunkd serve`: the settings form ------------------------------------------------

  const form = $("settings"), editor = $("editor");
  let strategies = new Map();
  let source = null;  // an opened file: {name, bytes}; null: the editor's text
  let asked = 0;      // the latest split asked for; older answers are dropped
  let maxBytes = Infinity;
  let tokenizer = "";  // the server's: what tokens count in

  function setStrategy(name) {
    const kind = strategies.get(name);
    $("strategy").value = name;
    const unit = $("unit");
    unit.replaceChildren(...kind.units.map((u) => {
      const option = element("option", "", u === "tokens" ? `tokens (${tokenizerName(tokenizer)})` : u);
      option.value = u;
      if (u === "tokens") option.title = `tokens of ${tokenizer}`;
      return option;
    }));
    unit.disabled = kind.units.length < 2;
    $("size").value = kind.default_size;
    $("overlap").value = "";
    const parents = kind.parents && !kind.window;
    $("parent-size-label").hidden = $("parent-overlap-label").hidden = !parents;
    $("parent-size").value = $("parent-overlap").value = "";
  }

  /** The query of a split: the settings as the command line spells them. */
  function query() {
    const kind = strategies.get($("strategy").value);
    const params = new URLSearchParams({ strategy: kind.name });
    params.set(kind.window ? "size" : $("unit").value, $("size").value.trim());
    const overlap = $("overlap").value.trim();
    if (overlap) params.set("overlap", overlap);
    const parentSize = $("parent-size").value.trim(), parentOverlap = $("parent-overlap").value.trim();
    if (!$("parent-size-label").hidden && parentSize) {
      params.set(`parent-${$("unit").value}`, parentSize);  // parents count in the chunks' unit
      if (parentOverlap) params.set("parent-overlap", parentOverlap);
    }
    params.set("errors", $("errors").value);
    if (source) params.set("doc", source.name);
    return params;
  }

  /** What the status line says of a split under way `elapsed` seconds: how far it is
   * (`progress`, the server's latest word), and for how long. */
  function progressText(progress, elapsed) {
    const time = `${tenths.format(elapsed)} s`;
    if (!progress) return `Splitting… ${time}`;
    const counts = `${count.format(progress.done)} of ${count.format(progress.total)}`;
    return progress.of === "sentences" ? `Embedding: ${counts} sentences · ${time}`
      : `Splitting: ${counts} ${progress.of} read · ${time}`;
  }

  /** A split's streamed answer: each progress line to `told` as it comes, then the
   * last line, {status, answer}. */
  async function readStream(answer, told) {
    const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      pending += value;
      let end;
      while (pending.startsWith('{"progress"') && (end = pending.indexOf("\n")) >= 0) {
        told(JSON.parse(pending.slice(0, end)).progress);
        pending = pending.slice(end + 1);
      }
    }
    return JSON.parse(pending);
  }

  let stopRunning = () => {};  // stops the split under way, if any

  async function split() {
    const body = source ? source.bytes : editor.value;
    const ticket = ++asked, began = performance.now();
    const size = source ? source.bytes.byteLength : body.length;
    stopRunning();  // a split asked for before: its connection closed, the server stops it
    const stop = new AbortController();
    let progress = null;
    // Past a second, the status line says how far the split is, and for how long.
    const showProgress = () => {
      const elapsed = (performance.now() - began) / 1000;
      if (ticket === asked && elapsed >= 1) status(progressText(progress, elapsed));
    };
    const ticker = setInterval(showProgress, 250);
    stopRunning = () => { clearInterval(ticker); stop.abort(); };
    showMessage("");
    status(size > 1e6 ? `Splitting ${byteSize(size)}…` : "Splitting…");
    // The status line is a live region, and its progress changes four times a second:
    // busy, a screen reader holds it until the split's outcome, said once.
    $("action-status").setAttribute("aria-busy", "true");
    $("split").disabled = true;
    let code = 0, result;
    try {
      const answer = await fetch(`/api/split?${query()}`, {
        method: "POST", body, signal: stop.signal,
        headers: { "Content-Type": "text/plain; charset=utf-8", Accept: "application/x-ndjson" } });
      code = answer.status;
      if (answer.headers.get("Content-Type") === "application/x-ndjson") {
        ({ status: code, answer: result } = await readStream(answer, (told) => {
          progress = told;
          showProgress();
        }));
      } else {
        const text = await answer.text();
        try { result = JSON.parse(text); } catch { result = { error: text.trim() || answer.statusText }; }
      }
    } catch {
      code = 0;
    } finally {
      clearInterval(ticker);
    }
    if (ticket !== asked) return;  // a newer split was asked for meanwhile
    stopRunning = () => {};
    $("split").disabled = false;
    $("action-status").removeAttribute("aria-busy");
    status("");
    if (!code) {
      showMessage("chunkd serve did not answer: is it still running?");
      return;
    }
    if (code !== 200 || result.error) {
      showMessage(result.error || `chunkd serve answered ${code}`);
      return;
    }
    show(result);
    status(`${count.format(shown.records.length)} chunks, shown in `
      + `${seconds.format((performance.now() - began) / 1000)} s.`);
  }

  async function open(file) {
    if (file.size > maxBytes) {  // not worth sending: the server would refuse it
      showMessage(`${file.name} is ${byteSize(file.size)}, more than this chunkd serve takes `
        + `(${byteSize(maxBytes)}); start it with a larger --max-bytes`);
      return;
    }
    status(`Reading ${file.name}…`);
    source = { name: file.name, bytes: await file.arrayBuffer() };
    editor.value = "";
    editor.placeholder = `${file.name} (${byteSize(file.size)}) is open. `
      + "Paste or type here to split other text instead.";
    split();
  }

  form.addEventListener("submit", (event) => { event.preventDefault(); split(); });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); split(); }
  });
  $("strategy").addEventListener("change", (event) => setStrategy(event.target.value));
  $("file").addEventListener("change", (event) => {
    if (event.target.files.length) open(event.target.files[0]);
    event.target.value = "";
  });
  editor.addEventListener("input", () => { source = null; });
  const pane = document.querySelector(".document-pane");
  pane.addEventListener("dragover", (event) => event.preventDefault());
  pane.addEventListener("drop", (event) => {
    event.preventDefault();
    if (event.dataTransfer.files.length) open(event.dataTransfer.files[0]);
  });

  fetch("/api/config").then((answer) => answer.json()).then((config) => {
    strategies = new Map(config.strategies.map((kind) => [kind.name, kind]));
    maxBytes = config.max_bytes;
    tokenizer = config.tokenizer;
    $("strategy").replaceChildren(...config.strategies.map((kind) => {
      const option = element("option", "", kind.name);
      option.title = kind.unavailable ? `This server cannot: ${kind.unavailable}` : kind.summary;
      option.disabled = Boolean(kind.unavailable);
      return option;
    }));
    const first = config.initial;
    setStrategy(first.strategy || "recursive");
    if (first.tokens !== null) $("unit").value = "tokens";
    const size = first.tokens ?? first.chars ?? first.size;
    if (size !== null) $("size").value = size;
    if (first.overlap !== null) $("overlap").value = first.overlap;
    const parentSize = first.parent_tokens ?? first.parent_chars;
    if (parentSize !== null) $("parent-size").value = parentSize;
    if (first.parent_overlap !== null) $("parent-overlap").value = first.parent_overlap;
    $("errors").value = first.errors;
    form.hidden = false;
    editor.focus();
  }).catch(() => showMessage("chunkd serve did not answer: is it still running?"));
})();
