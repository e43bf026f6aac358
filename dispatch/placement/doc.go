// Package placement decides which workers may run a job: a worker
// registers with labels (key=value pairs, Kubernetes' label rules), a job
// names the workers it may run on with a label selector (Kubernetes'
// label-selector syntax: "pool=gpu,region in (eu-west,eu-central),!spot"),
// and a worker credential may be limited to a selector that the labels of
// the workers holding it must satisfy.
//
// Parsing and matching are k8s.io/apimachinery's labels package; the
// label rules are its validation package's. This package bounds them
// (MaxLabels, MaxSelectorBytes), names the field in its errors, and gives
// the one decision the scheduler, the registry and the fault suite's
// checker share: Allows. It is pure (no I/O, no clock, no state) and
// links nothing of the server, so that the worker library and the API's
// documents may use it.
//
// # Guarantees
//
//   - Allows(selector, labels) is exactly the labels package's
//     Selector.Matches on labels.Set(labels) for a selector that parses;
//     a selector that does not parse allows nothing.
//   - The empty selector allows every label set, the empty one included.
//     A selector that only excludes ("!spot", "pool notin (cpu)") allows
//     the empty label set too: the scheduler treats a worker without a
//     registration (no labels known) apart, as one that only the empty
//     selector allows.
//   - ValidateLabels and ParseLabels accept only what Kubernetes accepts
//     for label keys and values, at most MaxLabels of them; Parse accepts
//     only what labels.Parse does, at most MaxSelectorBytes long.
//
// # Not guaranteed
//
//   - Which worker of those a selector allows gets a run: that is the
//     scheduler's (see dispatch's spreading rule).
//   - Selector.String returns the selector as written, not a canonical
//     form: two selectors that allow the same sets may print differently.
package placement
