package dispatch

import (
	"github.com/jobfleet/jobfleet/api"
	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// placed is a job's placement (api.Job.Placement) as its partition's
// scheduler keeps it: the selector parsed once, when the spec is taken
// in. A nil *placed is the default placement: any worker, retries
// elsewhere.
type placed struct {
	sel placement.Selector
	// invalid: the stored selector does not parse (it was validated when
	// stored, so this is corruption); no worker may take the job's runs.
	invalid bool
	text    string // the selector as stored
	// stay: retry_elsewhere is false.
	stay bool
}

// placedOf returns j's placement as the scheduler keeps it, nil for the
// default one.
func placedOf(j *api.Job) *placed {
	if j.Selector() == "" && j.RetriesElsewhere() {
		return nil
	}
	p := &placed{text: j.Selector(), stay: !j.RetriesElsewhere()}
	sel, err := placement.Parse(p.text)
	p.sel, p.invalid = sel, err != nil
	return p
}

// allows reports whether a worker with labels may take the job's runs;
// known says whether it has a registration at all: a worker without one
// has no labels, and only the empty selector allows it.
func (p *placed) allows(labels map[string]string, known bool) bool {
	switch {
	case p == nil:
		return true
	case p.invalid:
		return false
	case !known:
		return p.sel.Empty()
	}
	return p.sel.Allows(labels)
}

// selector returns the job's selector as stored, "" for none.
func (p *placed) selector() string {
	if p == nil {
		return ""
	}
	return p.text
}

// elsewhere reports whether the job's retries prefer another worker than
// the failed attempt's (retry_elsewhere, true by default).
func (p *placed) elsewhere() bool { return p == nil || !p.stay }
