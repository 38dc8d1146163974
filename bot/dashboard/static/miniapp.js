// The Mini App's sign-in: hand Telegram's signed initData to the server, which checks it
// and sets the session cookie; then show Today.
(function () {
  var tg = window.Telegram && window.Telegram.WebApp;
  var out = document.getElementById("status");
  if (!tg || !tg.initData) {
    out.textContent = "Open this page from the bot in Telegram, or send /dashboard for a sign-in link.";
    return;
  }
  tg.ready();
  fetch("/auth/webapp", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ init_data: tg.initData }).toString(),
  }).then(function (r) {
    if (r.ok) { window.location.replace("/"); return; }
    return r.text().then(function (t) { out.textContent = "Sign-in refused (" + r.status + ")."; });
  }).catch(function () { out.textContent = "The dashboard did not answer."; });
})();
