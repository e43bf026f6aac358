// Package console serves jobfleet's operator console: a single web page
// (HTML, one hand-written script and one style sheet, embedded in the
// binary) that every orchestrator serves under /ui/.
//
// The page holds no data and needs no credential to load. Everything it
// shows it fetches from the API (/v1/...) with the bearer token the user
// pastes into its sign-in form, which it keeps in the tab's
// sessionStorage: never in a URL and never in a cookie, so that another
// site cannot make the browser send it (no CSRF), and closing the tab
// forgets it.
//
// Guarantees: every reply carries a strict Content-Security-Policy
// (scripts, styles and connections only from the page's own origin, no
// inline script, no eval, no framing), X-Frame-Options: DENY,
// X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer; the
// script inserts text with textContent, never as HTML. Not guaranteed:
// what a user may do is decided by the API for each request; the page
// only hides the buttons the credential's role cannot use.
package console
