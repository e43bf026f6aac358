// Package layering holds the tests that keep the module's import graph in
// layers, and test code out of the jobfleet binary. It has no non-test
// code.
//
// Every package of the module has a level (the table in layering_test.go);
// a package may import only packages of lower levels, so that lower
// packages never depend on higher ones (store does not import dispatch,
// schedule imports nothing of the module). The test kits under
// internal/testkit sit above everything: tests may import them, production
// code may not, and the jobfleet binary links neither package testing nor
// any of them. A new package fails the test until it is given a level.
package layering
