// The Review page's keyboard: j / k move between items, and each button's
// data-shortcut key presses that button on the selected item (c confirm, b keep both,
// d dismiss). Archiving has no key: its button sits behind a disclosure of its own. Plain JS, no framework; the buttons are ordinary
// forms, so the page works the same without it.
(function () {
  "use strict";
  var queue = document.getElementById("review-queue");
  if (!queue) return;
  var items = Array.prototype.slice.call(queue.querySelectorAll("li.nudge"));
  if (!items.length) return;
  var storageKey = "memoryhub-review-index:" + window.location.pathname;
  var selected = -1;
  var submitting = false;

  function select(index, focus) {
    if (index < 0 || index >= items.length) return;
    if (selected >= 0) {
      items[selected].classList.remove("selected");
      items[selected].removeAttribute("aria-current");
    }
    selected = index;
    items[index].classList.add("selected");
    items[index].setAttribute("aria-current", "true");
    if (focus) {
      items[index].focus({ preventScroll: true });
      items[index].scrollIntoView({ block: "nearest" });
    }
  }

  function typingIn(target) {
    var tag = target && target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable);
  }

  // After an action the page reloads without the resolved item: the item now at the
  // same place is the next one to look at.
  var saved = parseInt(window.sessionStorage.getItem(storageKey) || "0", 10);
  window.sessionStorage.removeItem(storageKey);
  select(Math.min(isNaN(saved) ? 0 : saved, items.length - 1), false);

  queue.addEventListener("focusin", function (event) {
    var item = event.target.closest("li.nudge");
    if (item) select(items.indexOf(item), false);
  });
  queue.addEventListener("submit", function () {
    window.sessionStorage.setItem(storageKey, String(Math.max(selected, 0)));
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typingIn(event.target) || submitting) return;
    var key = event.key;
    if (key === "j" || key === "k") {
      select(selected + (key === "j" ? 1 : -1), true);
      event.preventDefault();
      return;
    }
    if (selected < 0 || key.length !== 1) return;
    var button = items[selected].querySelector('button[data-shortcut="' + key.toLowerCase() + '"]');
    if (!button) return;
    event.preventDefault();
    submitting = true;
    button.click();
  });
})();
