/* kbbot chat widget: <script src="https://kb.example.org/widget.js" data-token="..."></script>
 * A bubble at the bottom right opens a chat panel (in a shadow root, so the page's styles do not leak in).
 * Everything shown is set as text, except an answer's HTML, which the server sanitised by an allow-list and this
 * script checks again (only the allowed tags and attributes; pictures only from the widget's own server): an answer
 * cannot run script or load remote content, and its links open in a new tab.
 * The conversation lives in this page only (sessionStorage); each message sends its history to /widget/chat.
 * After a hand-off to a person, /widget/messages is polled every few seconds for the person's replies.
 * Opened with no conversation yet, it shows the welcome card (/widget/welcome); after an answer, related questions
 * to click, 👍 / 👎 (with fixed reasons) and, when the server asks it, "was this solved?" (/widget/feedback).
 * While the visitor types, /widget/typeahead offers the knowledge's questions below the input; a click asks one.
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.__kbbotWidget) return;
  window.__kbbotWidget = true;
  var base = new URL(script.src, location.href).origin;
  var token = script.getAttribute("data-token") || "";
  var title = script.getAttribute("data-title") || "知识库小助手 / KB Assistant";
  var key = "kbbot-widget:" + base;
  var state = {};
  try { state = JSON.parse(sessionStorage.getItem(key) || "{}"); } catch (e) { state = {}; }
  if (!state.session) {
    var bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);
    state.session = Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
    state.history = [];
  }
  function save() { try { sessionStorage.setItem(key, JSON.stringify(state)); } catch (e) { /* private mode */ } }

  var host = document.createElement("div");
  host.id = "kbbot-widget";
  document.body.appendChild(host);
  var root = host.attachShadow({ mode: "open" });
  var style = document.createElement("style");
  style.textContent = [
    ":host{all:initial}",
    ".bubble{position:fixed;right:20px;bottom:20px;width:56px;height:56px;border-radius:50%;border:0;",
    "background:#f97316;color:#fff;font-size:26px;cursor:pointer;box-shadow:0 4px 12px rgba(0,0,0,.25);z-index:2147483646}",
    ".panel{position:fixed;right:20px;bottom:88px;width:360px;max-width:calc(100vw - 40px);height:480px;",
    "max-height:calc(100vh - 120px);background:#fff;border-radius:12px;box-shadow:0 8px 30px rgba(0,0,0,.3);",
    "display:none;flex-direction:column;font:14px/1.5 system-ui,'WenQuanYi Micro Hei',sans-serif;color:#222;z-index:2147483647}",
    ".panel.open{display:flex}",
    ".head{padding:10px 14px;background:#f97316;color:#fff;border-radius:12px 12px 0 0;font-weight:600}",
    ".log{flex:1;overflow:auto;padding:10px}",
    ".msg{margin:6px 0;padding:8px 10px;border-radius:10px;white-space:pre-wrap;word-break:break-word;max-width:85%}",
    ".user{background:#ffedd5;margin-left:auto}",
    ".bot{background:#f3f4f6}",
    ".error{background:#fee2e2;color:#991b1b}",
    ".person{background:#dcfce7;border:1px solid #86efac}",
    ".who{display:block;font-size:12px;font-weight:600;color:#166534;margin-bottom:2px}",
    ".notice{background:none;color:#6b7280;font-size:12px;text-align:center;margin:6px auto}",
    ".options{display:flex;flex-wrap:wrap;gap:6px;margin:4px 0}",
    ".options button{border:1px solid #f97316;background:#fff;color:#c2410c;border-radius:14px;padding:4px 10px;cursor:pointer}",
    ".questions{display:flex;flex-wrap:wrap;gap:6px;margin:2px 0 6px}",
    ".questions button{border:1px solid #fdba74;background:#fff7ed;color:#9a3412;border-radius:14px;padding:4px 10px;cursor:pointer;text-align:left}",
    ".sources{font-size:12px;color:#555;margin:2px 0 8px}",
    ".card-head{font-size:12px;color:#6b7280;margin:8px 0 2px}",
    ".rate{display:flex;flex-wrap:wrap;gap:4px;align-items:center;margin:0 0 6px;font-size:12px;color:#555}",
    ".rate button{border:1px solid #d1d5db;background:#fff;border-radius:12px;padding:2px 8px;cursor:pointer;font:inherit}",
    ".rate input{flex:1;min-width:120px;border:1px solid #d1d5db;border-radius:6px;padding:3px 6px;font:inherit}",
    ".rich{white-space:normal}.rich p{margin:.3em 0}.rich ul,.rich ol{margin:.3em 0;padding-left:1.4em}",
    ".rich img{display:block;max-width:100%;height:auto;border-radius:6px;margin:4px 0}.rich a{color:#c2410c}",
    "form{display:flex;border-top:1px solid #eee}",
    "input{flex:1;border:0;padding:12px;font:inherit;outline:none}",
    "form button{border:0;background:#f97316;color:#fff;padding:0 16px;cursor:pointer;border-radius:0 0 12px 0}",
    ".suggest{display:none;max-height:40%;overflow:auto;border-top:1px solid #eee;border-radius:0 0 12px 12px}",
    ".suggest.open{display:block}",
    ".panel.suggesting form button{border-radius:0}",
    ".suggest button{display:block;width:100%;text-align:left;border:0;border-bottom:1px solid #f3f4f6;background:#fff;",
    "padding:7px 12px;font:inherit;color:#222;cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}",
    ".suggest button:hover,.suggest button:focus{background:#fff7ed;outline:none}",
  ].join("");
  root.appendChild(style);

  var bubble = el("button", "bubble", "💬");
  bubble.setAttribute("aria-label", "打开聊天 / Open chat");
  var panel = el("div", "panel");
  panel.setAttribute("role", "dialog");
  var head = el("div", "head", title);
  var log = el("div", "log");
  log.setAttribute("aria-live", "polite");
  var form = el("form");
  var input = el("input");
  input.placeholder = "输入问题 / Ask a question";
  input.maxLength = 2000;
  var send = el("button", null, "发送 / Send");
  send.type = "submit";
  form.appendChild(input);
  form.appendChild(send);
  var suggest = el("div", "suggest");
  suggest.setAttribute("role", "listbox");
  suggest.setAttribute("aria-label", "猜你想问 / Suggested questions");
  panel.appendChild(head);
  panel.appendChild(log);
  panel.appendChild(form);
  panel.appendChild(suggest);
  root.appendChild(panel);
  root.appendChild(bubble);

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text != null) node.textContent = text;
    return node;
  }
  // Markdown read as text: bold and headings unmarked, list items ("- other related entry") as bullets.
  function plain(text) {
    return String(text || "").replace(/\*\*(.+?)\*\*/g, "$1").replace(/^#+\s*/gm, "").replace(/^\s*[-*]\s+/gm, "• ");
  }
  // The tags and attributes an answer's HTML may hold (the server's allow-list, bot/knowledge/markup.py).
  var TAGS = "P BR STRONG EM DEL S CODE PRE BLOCKQUOTE UL OL LI H1 H2 H3 H4 H5 H6 HR A IMG TABLE THEAD TBODY TR TH TD".split(" ");
  var ATTRS = { A: ["href", "title", "target", "rel"], IMG: ["src", "alt", "title"], OL: ["start"] };
  function rich(html) {
    var box = el("div", "msg bot rich");
    var t = document.createElement("template");  // inert: nothing in it loads or runs
    t.innerHTML = String(html || "");
    Array.prototype.slice.call(t.content.querySelectorAll("*")).forEach(function (node) {
      if (TAGS.indexOf(node.tagName) < 0) { node.replaceWith(document.createTextNode(node.textContent)); return; }
      Array.prototype.slice.call(node.attributes).forEach(function (a) {
        if ((ATTRS[node.tagName] || []).indexOf(a.name) < 0) node.removeAttribute(a.name);
      });
      if (node.tagName === "IMG") {  // pictures only from the widget's server
        var src = node.getAttribute("src") || "";
        if (src.charAt(0) !== "/" || src.charAt(1) === "/") node.replaceWith(document.createTextNode(node.alt || ""));
        else node.setAttribute("src", base + src);
      } else if (node.tagName === "A") {
        var href = node.getAttribute("href") || "";
        if (href.charAt(0) === "/" && href.charAt(1) !== "/") node.setAttribute("href", base + href);
        else if (!/^(https?:|mailto:|tel:)/i.test(href)) node.removeAttribute("href");
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
    box.appendChild(t.content);
    return box;
  }
  function show(role, text) {
    var node = log.appendChild(el("div", "msg " + role, role === "bot" ? plain(text) : text));
    log.scrollTop = log.scrollHeight;
    return node;
  }
  // A reply taller than the log shows from its start, not its end; a short one leaves the log at the bottom.
  function reveal(node) {
    var top = node.offsetTop - log.offsetTop - 8;
    log.scrollTop = node.offsetHeight > log.clientHeight ? top : log.scrollHeight;
  }
  function showPerson(name, text) {
    var node = el("div", "msg person");
    node.appendChild(el("span", "who", "👤 " + name + "（人工客服 / staff）"));
    node.appendChild(document.createTextNode(text));
    log.appendChild(node);
    log.scrollTop = log.scrollHeight;
  }
  function showRich(html) {
    var node = log.appendChild(rich(html));
    log.scrollTop = log.scrollHeight;
    return node;
  }
  function showReply(data) {
    var reply = data.html ? showRich(data.html) : data.reply ? show("bot", data.reply) : null;
    var offered = data.handoff && data.handoff.status === "offered";
    if ((data.options && data.options.length) || offered) {
      var row = el("div", "options");
      (data.options || []).forEach(function (option, i) {
        var b = el("button", null, (i + 1) + ". " + option.question);
        b.type = "button";
        b.addEventListener("click", function () { ask(option.question); });
        row.appendChild(b);
      });
      if (offered) {
        var person = el("button", "get-person", "转人工 / Get a person");
        person.type = "button";
        person.addEventListener("click", function () { ask("转人工"); });
        row.appendChild(person);
      }
      log.appendChild(row);
    }
    if (data.related && data.related.length) {
      log.appendChild(el("div", "card-head", "猜你想问 / You may also ask"));
      log.appendChild(questionRow("related", data.related.map(function (r) { return r.question; })));
    }
    if (data.feedback) log.appendChild(rateRow(data.feedback));
    if (data.sources && data.sources.length) {
      log.appendChild(el("div", "sources", "来源 / Sources: " + data.sources.map(function (s) { return s.query; }).join(" · ")));
    }
    if (reply) reveal(reply);
    else log.scrollTop = log.scrollHeight;
  }
  // Buttons that ask their question when clicked (the welcome card, related questions).
  function questionRow(cls, questions) {
    var row = el("div", "questions " + cls);
    questions.forEach(function (q) {
      var b = el("button", null, q);
      b.type = "button";
      b.addEventListener("click", function () { ask(q); });
      row.appendChild(b);
    });
    return row;
  }
  function rate(body, row) {
    body.session = state.session;
    body.token = token;
    row.textContent = "…";
    fetch(base + "/widget/feedback", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        row.textContent = response.ok ? data.message : (data.error || "HTTP " + response.status);
      });
    }).catch(function () { row.textContent = "无法连接到知识库 / Cannot reach the knowledge base."; });
  }
  function button(label, cls, onClick) {
    var b = el("button", cls, label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }
  // 👍 / 👎 under an answer; a 👎 asks why (the fixed reasons, then optional text), as the page does.
  function rateRow(offer) {
    var box = el("div");
    var row = el("div", "rate");
    row.appendChild(button("👍", "up", function () { rate({ turn: offer.turn, rating: "up" }, row); }));
    row.appendChild(button("👎", "down", function () {
      row.textContent = "";
      var chosen = null;
      offer.reasons.forEach(function (r) {
        row.appendChild(button(r.label, "reason", function (event) {
          chosen = r.key;
          Array.prototype.forEach.call(row.querySelectorAll(".reason"), function (b) { b.style.borderColor = ""; });
          event.target.style.borderColor = "#f97316";
        }));
      });
      var why = el("input");
      why.placeholder = "哪里不对？（可选）/ What was wrong? (optional)";
      why.maxLength = 500;
      row.appendChild(why);
      row.appendChild(button("提交 / Send", "send-reason", function () {
        rate({ turn: offer.turn, rating: "down", reason: chosen, text: why.value }, row);
      }));
    }));
    box.appendChild(row);
    if (offer.solved) {
      var solved = el("div", "rate solved");
      solved.appendChild(el("span", null, offer.solved.question));
      solved.appendChild(button(offer.solved.yes, "yes", function () { rate({ turn: offer.turn, solved: true }, solved); }));
      solved.appendChild(button(offer.solved.no, "no", function () { rate({ turn: offer.turn, solved: false }, solved); }));
      box.appendChild(solved);
    }
    return box;
  }
  // The welcome card, once per page, when the conversation is empty.
  var welcomed = false;
  function welcome() {
    if (welcomed || (state.history || []).length) return;
    welcomed = true;
    fetch(base + "/widget/welcome", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: token }),
    }).then(function (response) { return response.ok ? response.json() : null; }).then(function (data) {
      if (!data || !data.questions || !data.questions.length || (state.history || []).length) return;
      var card = el("div", "welcome");
      card.appendChild(el("div", "card-head", "大家都在问 / Popular questions"));
      card.appendChild(questionRow("welcome-questions", data.questions));
      log.insertBefore(card, log.firstChild);
    }).catch(function () { welcomed = false; });
  }

  (state.history || []).forEach(function (m) {
    if (m.person) showPerson(m.person, m.text);
    else if (m.notice) show("notice", m.content);
    else if (m.html) showRich(m.html);
    else show(m.role === "user" ? "user" : "bot", m.content);
  });

  // A hand-off: a person's replies and the desk's notices arrive by polling, each shown as text.
  var polling = null;
  function poll() {
    fetch(base + "/widget/messages", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ session: state.session, token: token, after: state.seen || 0 }),
    }).then(function (response) { return response.ok ? response.json() : null; }).then(function (data) {
      if (!data) return;
      (data.messages || []).forEach(function (m) {
        if (m.role === "agent") {
          showPerson(m.author || "", m.text);
          state.history.push({ role: "assistant", content: "👤 " + (m.author || "") + "：" + m.text, person: m.author || "", text: m.text });
        } else {
          show("notice", m.text);
          state.history.push({ role: "assistant", content: m.text, notice: true });
        }
        state.seen = m.id;
      });
      var open = data.status === "open" || data.status === "claimed";
      state.waiting = open;
      save();
      if (!open) stopPolling();
    }).catch(function () { /* offline for a moment: the next tick tries again */ });
  }
  function startPolling() {
    state.waiting = true;
    save();
    if (!polling) polling = setInterval(poll, 3000);
  }
  function stopPolling() {
    if (polling) clearInterval(polling);
    polling = null;
  }
  if (state.waiting) startPolling();

  // Type-ahead: a look-up 150 ms after the last keystroke; a reply to an older look-up is dropped.
  var typing = null;
  var lookups = 0;
  function offer(list) {
    suggest.textContent = "";
    list.forEach(function (s) {
      var b = el("button", null, s.question);
      b.type = "button";
      b.title = s.question;
      b.addEventListener("click", function () { ask(s.question); });
      suggest.appendChild(b);
    });
    suggest.classList.toggle("open", list.length > 0);
    panel.classList.toggle("suggesting", list.length > 0);
  }
  function lookUp() {
    var n = ++lookups;
    var text = input.value;
    if (!text.trim()) { offer([]); return; }
    fetch(base + "/widget/typeahead", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ text: text, token: token }),
    }).then(function (response) { return response.ok ? response.json() : null; }).then(function (data) {
      if (n === lookups) offer((data && data.suggestions) || []);
    }).catch(function () { /* offline for a moment: the next keystroke tries again */ });
  }
  input.addEventListener("input", function () {
    clearTimeout(typing);
    typing = setTimeout(lookUp, 150);
  });
  input.addEventListener("keydown", function (event) {
    if (event.key === "Escape") offer([]);
    if (event.key === "ArrowDown" && suggest.firstChild) { event.preventDefault(); suggest.firstChild.focus(); }
  });
  suggest.addEventListener("keydown", function (event) {
    var at = root.activeElement;
    if (event.key === "ArrowDown" && at && at.nextSibling) { event.preventDefault(); at.nextSibling.focus(); }
    if (event.key === "ArrowUp") { event.preventDefault(); (at && at.previousSibling ? at.previousSibling : input).focus(); }
    if (event.key === "Escape") { offer([]); input.focus(); }
  });

  function ask(text) {
    text = String(text || "").trim();
    if (!text) return;
    clearTimeout(typing);
    lookups++;
    offer([]);
    show("user", text);
    input.value = "";
    send.disabled = true;
    var history = (state.history || []).slice(-20);
    // the server reads the role and the text; the rest (an answer's HTML, who wrote it) stays in this page
    var sent = history.map(function (m) { return { role: m.role, content: m.content }; });
    fetch(base + "/widget/chat", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ message: text, history: sent, session: state.session, token: token }),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (!response.ok) throw new Error(data.error || "HTTP " + response.status);
        state.history = history.concat([{ role: "user", content: text }]);
        if (data.reply) state.history.push({ role: "assistant", content: data.reply, html: data.html });
        save();
        showReply(data);
        if (data.handoff && data.handoff.id) startPolling();
      });
    }).catch(function (error) {
      var message = error && error.message && error.message !== "Failed to fetch" ? error.message
        : "无法连接到知识库 / Cannot reach the knowledge base.";
      log.appendChild(el("div", "msg error", message));
    }).then(function () { send.disabled = false; input.focus(); });
  }

  bubble.addEventListener("click", function () {
    panel.classList.toggle("open");
    if (panel.classList.contains("open")) {
      welcome();
      input.focus();
    }
  });
  form.addEventListener("submit", function (event) { event.preventDefault(); ask(input.value); });
})();
