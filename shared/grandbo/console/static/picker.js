// The entry pickers: an input with data-picker="<datalist id>" offers, as its person
// types, the entries whose title or summary holds the words (the console's own /picker);
// each choice's value is the entry's id, its label the title. Without this script the
// input takes a pasted id, as before.
"use strict";
(function () {
  function attach(input) {
    var list = document.getElementById(input.getAttribute("data-picker"));
    if (!list) return;
    var timer = null;
    var asked = "";
    input.addEventListener("input", function () {
      var text = input.value.trim();
      if (timer) clearTimeout(timer);
      if (text.length < 2 || /^[0-9a-f-]{36}$/i.test(text)) return;
      timer = setTimeout(function () {
        asked = text;
        fetch("/picker?" + new URLSearchParams({ text: text }), {
          credentials: "same-origin",
          headers: { Accept: "application/json" },
        })
          .then(function (answer) {
            return answer.ok ? answer.json() : { entries: [] };
          })
          .then(function (found) {
            if (asked !== text) return; // a later keystroke asked again
            while (list.firstChild) list.removeChild(list.firstChild);
            (found.entries || []).forEach(function (entry) {
              var option = document.createElement("option");
              option.value = entry.entry_id;
              option.label = entry.title + " (" + entry.status + ")";
              option.textContent = entry.title + " (" + entry.status + ")";
              list.appendChild(option);
            });
          })
          .catch(function () {});
      }, 150);
    });
  }
  document.querySelectorAll("input[data-picker]").forEach(attach);
})();
