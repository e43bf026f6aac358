//go:build !linux

package worker

// protectFromShellJobs does nothing on this platform: there is no
// equivalent of Linux's PR_SET_DUMPABLE here, and a shell job may be able
// to inspect the worker's process like any process of its user.
func protectFromShellJobs() error { return nil }
