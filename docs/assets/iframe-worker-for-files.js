/* Grandbo's documentation site, opened as a file (site/index.html from a closed network):
 * the browser refuses a Web Worker whose script is a file:// URL, and the theme's search
 * runs in one. Here a worker's script runs in a hidden frame of this page instead, and
 * messages pass between the two as they would between a page and its worker. Served over
 * HTTP, the browser's own Worker is left alone. Nothing is fetched from another host. */
(function () {
  "use strict";
  if (location.protocol !== "file:" || typeof EventTarget !== "function") {
    return;
  }

  function FileWorker(url) {
    var target = new EventTarget();
    var worker = this;
    var queued = [];
    var ready = false;
    var frame = document.createElement("iframe");
    frame.hidden = true;
    frame.setAttribute("aria-hidden", "true");
    frame.tabIndex = -1;
    (document.body || document.documentElement).appendChild(frame);
    var scope = frame.contentWindow;

    function deliver(data) {
      var event = new MessageEvent("message", { data: data });
      target.dispatchEvent(event);
      if (typeof worker.onmessage === "function") {
        worker.onmessage(event);
      }
    }

    function send(data) {
      scope.dispatchEvent(new scope.MessageEvent("message", { data: data }));
    }

    // what the worker's script sees as its global scope's
    scope.postMessage = function (data) {
      setTimeout(function () { deliver(data); }, 0);
    };
    scope.importScripts = function () {
      throw new Error("importScripts: not available to a site opened as a file");
    };

    this.onmessage = null;
    this.onerror = null;
    this.addEventListener = target.addEventListener.bind(target);
    this.removeEventListener = target.removeEventListener.bind(target);
    this.dispatchEvent = target.dispatchEvent.bind(target);
    this.postMessage = function (data) {
      if (ready) {
        send(data);
      } else {
        queued.push(data);
      }
    };
    this.terminate = function () {
      frame.remove();
    };

    var script = scope.document.createElement("script");
    script.src = new URL(url, location.href).href;
    script.onload = function () {
      ready = true;
      queued.splice(0).forEach(send);
    };
    script.onerror = function () {
      var event = new ErrorEvent("error", { message: "could not load " + script.src });
      target.dispatchEvent(event);
      if (typeof worker.onerror === "function") {
        worker.onerror(event);
      }
    };
    scope.document.head.appendChild(script);
  }

  window.Worker = FileWorker;
})();
