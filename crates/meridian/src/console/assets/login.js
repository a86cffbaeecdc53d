// The sign-in form: posts the DN and password as JSON (a form another
// site posts cannot), then opens the console.
"use strict";
document.getElementById("sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const error = document.getElementById("error");
  error.textContent = "";
  const body = JSON.stringify({
    dn: document.getElementById("dn").value,
    password: document.getElementById("password").value,
  });
  try {
    const answer = await fetch("/api/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body,
      credentials: "same-origin",
    });
    if (answer.ok) {
      window.location.assign("/#/jobs");
      return;
    }
    const text = await answer.text();
    let message = text;
    try { message = JSON.parse(text).error; } catch (_) { /* not JSON */ }
    error.textContent = message || answer.statusText;
  } catch (e) {
    error.textContent = "the console did not answer: " + e;
  }
});
