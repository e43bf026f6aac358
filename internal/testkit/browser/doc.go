// Package browser holds the console's browser tests: they drive a
// headless Chromium (chromedp) against the console of a real fleet. See
// docs/console.md#tests for how to run them.
package browser
