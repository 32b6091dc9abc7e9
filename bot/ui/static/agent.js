/* kbbot agent console: the open tickets (longest waiting first), one ticket's transcript and messages, claim,
 * reply, resolve. Everything from the server is set as text (textContent), never as HTML. Polls every 3 s. */
(function () {
  "use strict";
  var api = "agent/api/tickets";
  var view = "open", chosen = null, me = "";
  var tabs = [["open", "待接待 / Waiting"], ["claimed", "接待中 / In progress"], ["resolved", "已解决 / Resolved"],
    ["expired", "已过期 / Expired"]];
  var said = { visitor: "访客 / visitor", bot: "机器人 / bot",
    unverified: "⚠️ 客户端所称的机器人回复（机器人没有说过）/ claimed bot reply (not on record)" };
  var reasons = { asked: "主动要求 / asked", offer_accepted: "接受了转人工提议 / accepted the offer",
    misses: "多次未找到 / after misses" };

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text != null) node.textContent = text;
    return node;
  }
  function wait(seconds) {
    if (seconds < 60) return seconds + " 秒 / s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " 分钟 / min";
    return Math.floor(seconds / 3600) + " 小时 / h " + Math.floor((seconds % 3600) / 60) + " 分 / min";
  }
  function call(method, url, body) {
    var options = { method: method, headers: {}, credentials: "same-origin" };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(url, options).then(function (r) {
      return r.json().catch(function () { return {}; }).then(function (data) {
        if (r.status === 401) { location.href = "agent/login"; }
        if (!r.ok) throw new Error(data.error || ("HTTP " + r.status));
        return data;
      });
    });
  }
  function say(text) { var s = document.getElementById("status"); if (s) s.textContent = text || ""; }

  var tabBox = document.getElementById("tabs");
  tabs.forEach(function (t) {
    var b = el("button", t[0] === view ? "on" : "", t[1]);
    b.id = "kb-agent-tab-" + t[0];
    b.addEventListener("click", function () { view = t[0]; refreshTabs(); loadList(); });
    tabBox.appendChild(b);
  });
  function refreshTabs() {
    Array.prototype.forEach.call(tabBox.children, function (b, i) { b.className = tabs[i][0] === view ? "on" : ""; });
  }

  function loadList() {
    return call("GET", api + "?status=" + view).then(function (data) {
      me = data.agent;
      document.getElementById("me").textContent = "👤 " + me;
      var problems = document.getElementById("problems");
      problems.hidden = !data.problems.length;
      problems.textContent = data.problems.length ? "⚠️ 通知未送达，稍后重试 / Notices not delivered yet, retrying: " +
        data.problems.map(function (p) { return p.channel + " #" + p.ticket + " ×" + p.attempts + ": " + p.error; }).join(" · ") : "";
      var list = document.getElementById("list");
      list.textContent = "";
      if (!data.tickets.length) list.appendChild(el("p", "empty", "没有工单 / No tickets."));
      data.tickets.forEach(function (t) {
        var card = el("div", "ticket" + (t.id === chosen ? " on" : ""));
        card.id = "kb-ticket-" + t.id;
        card.appendChild(el("div", "meta", "#" + t.id + " · " + t.channel + " · " + (reasons[t.reason] || t.reason)));
        card.appendChild(el("div", "q", t.question));
        card.appendChild(el("div", "meta", (t.status === "open" ? "已等待 / waiting " : "最后消息 / last message ") +
          wait(t.waited) + (t.agent ? " · " + t.agent : "")));
        card.addEventListener("click", function () { chosen = t.id; loadList(); loadTicket(); });
        list.appendChild(card);
      });
    }).catch(function (e) { say(e.message); });
  }

  function line(cls, who, text) {
    var node = el("div", "line " + cls);
    node.appendChild(el("span", "who", who));
    node.appendChild(document.createTextNode(text));
    return node;
  }

  function loadTicket() {
    if (chosen == null) return Promise.resolve();
    return call("GET", api + "/" + chosen).then(function (t) {
      // The draft is read when the answer lands, not when it was asked for: what the agent typed while the
      // request was in flight would otherwise be wiped by the rebuild. It stays with its own ticket.
      var keep = document.getElementById("kb-agent-reply");
      var draft = keep && keep.getAttribute("data-ticket") === String(t.id) ? keep.value : "";
      var box = document.getElementById("detail");
      box.textContent = "";
      var card = el("div", "card");
      card.id = "kb-agent-ticket";
      card.appendChild(el("h3", null, "#" + t.id + " " + t.question));
      card.appendChild(el("div", "meta", t.status + " · " + (reasons[t.reason] || t.reason) + " · " + t.channel +
        (t.agent ? " · " + t.agent : "") + " · " + wait(t.waited)));
      var log = el("div");
      log.id = "kb-agent-messages";
      t.transcript.forEach(function (l) { log.appendChild(line(l.said, said[l.said] || l.said, l.text)); });
      t.messages.forEach(function (m) {
        var who = m.role === "agent" ? "👤 " + m.author : m.role === "visitor" ? said.visitor : m.role === "bot" ? said.bot : "";
        log.appendChild(line(m.role, who, m.text));
      });
      card.appendChild(log);
      var actions = el("div", "actions");
      if (t.status === "open") {
        var claim = el("button", "act", "接待 / Claim");
        claim.id = "kb-agent-claim";
        claim.addEventListener("click", function () {
          call("POST", api + "/" + t.id + "/claim", {}).then(function () { say(""); view = "claimed"; refreshTabs(); loadList(); loadTicket(); })
            .catch(function (e) { say(e.message); loadList(); loadTicket(); });
        });
        actions.appendChild(claim);
      }
      if (t.status === "claimed" && t.agent === me) {
        var text = el("textarea");
        text.id = "kb-agent-reply";
        text.setAttribute("data-ticket", String(t.id));
        text.placeholder = "回复访客 / Reply to the visitor";
        text.value = draft;
        var send = el("button", "act", "发送 / Send");
        send.id = "kb-agent-send";
        send.addEventListener("click", function () {
          if (!text.value.trim()) return;
          // Only what was sent leaves the box: what the agent typed while it was on its way stays.
          var sent = text.value;
          call("POST", api + "/" + t.id + "/reply", { text: sent }).then(function () {
            var box = document.getElementById("kb-agent-reply");  // a refresh in flight may have rebuilt it
            if (box && box.getAttribute("data-ticket") === String(t.id) && box.value.indexOf(sent) === 0) {
              box.value = box.value.slice(sent.length).replace(/^\s+/, "");
            }
            say("");
            loadTicket();
          })
            .catch(function (e) { say(e.message); });
        });
        actions.appendChild(text);
        actions.appendChild(send);
      }
      if (t.status === "claimed" && t.agent === me || t.status === "open") {
        var done = el("button", "act plain", "解决 / Resolve");
        done.id = "kb-agent-resolve";
        done.addEventListener("click", function () {
          call("POST", api + "/" + t.id + "/resolve", {}).then(function () { say(""); loadList(); loadTicket(); })
            .catch(function (e) { say(e.message); });
        });
        actions.appendChild(done);
      }
      card.appendChild(actions);
      var status = el("div");
      status.id = "status";
      card.appendChild(status);
      box.appendChild(card);
      var reply = document.getElementById("kb-agent-reply");
      if (reply && keep && document.activeElement === document.body) reply.focus();
    }).catch(function (e) { say(e.message); });
  }

  loadList();
  setInterval(function () { loadList(); if (!document.getElementById("kb-agent-reply") ||
    !document.getElementById("kb-agent-reply").value) loadTicket(); }, 3000);
})();
