package placement_test

import (
	"fmt"

	"github.com/jobfleet/jobfleet/dispatch/placement"
)

// A job's placement selector names the workers that may run it, by their
// registered labels.
func ExampleAllows() {
	selector := "pool=gpu,region in (eu-west,eu-central),!spot"
	for _, l := range []map[string]string{
		{"pool": "gpu", "region": "eu-west"},
		{"pool": "gpu", "region": "eu-west", "spot": "true"},
		{"pool": "cpu", "region": "eu-west"},
		nil,
	} {
		fmt.Printf("%-34q %v\n", placement.FormatLabels(l), placement.Allows(selector, l))
	}
	// Output:
	// "pool=gpu,region=eu-west"          true
	// "pool=gpu,region=eu-west,spot=true" false
	// "pool=cpu,region=eu-west"          false
	// ""                                 false
}

// The --labels flag of a worker is parsed and checked against
// Kubernetes' label rules.
func ExampleParseLabels() {
	l, err := placement.ParseLabels("pool=gpu,region=eu-west")
	fmt.Println(l, err)
	_, err = placement.ParseLabels("pool=gpu,pool=cpu")
	fmt.Println(err)
	// Output:
	// map[pool:gpu region:eu-west] <nil>
	// invalid placement: key "pool" is given twice
}
