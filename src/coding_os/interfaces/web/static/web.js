// cos web: the page's own script (no inline script runs: the Content-Security-Policy allows
// only the server's files). It sends the CSRF token with every htmx request, shows an error
// answer in #flash, and follows a session's live events over Server-Sent Events.
(function () {
  "use strict";

  function csrf() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  document.addEventListener("htmx:configRequest", function (evt) {
    evt.detail.headers["X-CSRF-Token"] = csrf();
  });

  // The roster's rows are fetched again every 2 s: not while the user types in one of them
  // (a reply being written would be wiped by the swap).
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var rows = document.getElementById("roster-rows");
    var active = document.activeElement;
    if (rows && evt.detail.elt === rows && active && rows.contains(active) &&
        (active.tagName === "INPUT" || active.tagName === "TEXTAREA")) {
      evt.preventDefault();
    }
  });

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr && xhr.status >= 400) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
      evt.detail.target = document.getElementById("flash");
    }
  });

  function describe(msg) {
    if (typeof msg.text === "string") { return msg.text; }
    if (typeof msg.tool === "string") { return msg.tool + " " + JSON.stringify(msg.input); }
    if (msg.output !== undefined) { return typeof msg.output === "string" ? msg.output : JSON.stringify(msg.output); }
    if (typeof msg.message === "string") { return msg.message; }
    if (typeof msg.reason === "string") { return msg.reason; }
    return "";
  }

  function follow(list) {
    var shown = parseInt(list.getAttribute("data-since") || "0", 10) || 0;
    var status = document.getElementById("live-status");
    var url = list.getAttribute("data-events-url") + "?since=" + shown;
    var source = new EventSource(url);
    source.addEventListener("protocol", function (evt) {
      var event;
      try { event = JSON.parse(evt.data); } catch (e) { return; }
      if (typeof event.seq !== "number" || event.seq <= shown) { return; }  // never twice
      shown = event.seq;
      list.setAttribute("data-since", String(shown));
      var msg = event.msg || {};
      var item = document.createElement("li");
      item.setAttribute("data-testid", "live-event");
      item.setAttribute("data-seq", String(event.seq));
      item.setAttribute("data-type", String(msg.type || ""));
      var seq = document.createElement("span");
      seq.className = "seq";
      seq.textContent = String(event.seq);
      var type = document.createElement("span");
      type.className = "type";
      type.textContent = String(msg.type || "");
      item.appendChild(seq);
      item.appendChild(document.createTextNode(" "));
      item.appendChild(type);
      item.appendChild(document.createTextNode(" " + describe(msg)));  // text, never markup
      list.appendChild(item);
      if (status) { status.textContent = "live"; }
    });
    source.addEventListener("end", function (evt) {
      source.close();
      var state = "";
      try { state = JSON.parse(evt.data).state || ""; } catch (e) { state = ""; }
      if (status) { status.textContent = "ended" + (state ? " (" + state + ")" : ""); }
      list.setAttribute("data-ended", "true");
    });
    source.addEventListener("error", function () {
      if (status && source.readyState !== EventSource.CLOSED) { status.textContent = "reconnecting"; }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var list = document.getElementById("live");
    if (list) { follow(list); }
  });
})();
