// Package settings holds what every configurable part of jobfleet shares:
// the one zero convention, the error a Config's Validate returns for a bad
// setting, and the flag helpers that bind a setting straight into the
// Config field that holds its default.
//
// The zero convention, for every number, size and duration a Config
// takes: 0 means the default (the value DefaultConfig writes out, or one
// derived as the setting's documentation says); a negative value means
// unbounded (no limit, never, off) where unbounded makes sense, and is
// refused where it does not. A flag whose negative value is unbounded is
// marked with Unbounded, which also says so in its help.
//
// A setting's name (its Key) is the same everywhere: the flag
// (--load-jobs-in-flight), the config file's key (load-jobs-in-flight),
// the environment variable (JOBFLEET_LOAD_JOBS_IN_FLIGHT, derived by the
// command line) and the errors of Validate.
//
// Guarantees:
//
//   - An *Error names the setting's key, the value refused and the rule
//     it breaks, so that the command line can say where the value came
//     from (a flag, a variable, a config file) without parsing messages.
//   - A flag defined with BytesVar prints its value exactly (1GiB, not
//     1.0 GiB), so that what the command line prints reads back the same.
//
// Not guaranteed: that a flag's help repeats the zero convention (it says
// only what a negative value means, when it is allowed); the command
// line's tests check that every flag's help agrees with its annotation.
//
// The package imports only the standard library and spf13/pflag, so that
// libraries users import (the worker library) can use it.
package settings
