package egress_test

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/jobfleet/jobfleet/egress"
)

// A Guard refuses, before anything is sent, destinations the policy
// denies: cloud metadata (link-local, denied by default), the fleet's own
// endpoints and etcd's ports; and allows what the policy lists.
func ExampleGuard_CheckURL() {
	g, err := egress.NewGuard(egress.Policy{
		Allow: []string{"127.0.0.1:9000"},        // a receiver on this host
		Fleet: []string{"https://10.0.0.9:2379"}, // etcd
	})
	if err != nil {
		panic(err)
	}
	g.SetOrchestrators([]string{"http://10.0.0.5:8080"})
	for _, raw := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://10.0.0.5:8080/v1/jobs",
		"https://10.0.0.9:2379/v3/kv/range",
		"http://127.0.0.1:9000/hook",
		"https://hooks.example.com/run",
	} {
		u, _ := url.Parse(raw)
		err := g.CheckURL(u)
		fmt.Println(errors.Is(err, egress.ErrDestinationDenied), err)
	}
	// Output:
	// true destination 169.254.169.254:80 refused: link-local address (169.254.0.0/16), denied by default (allow it with --http-allow)
	// true destination 10.0.0.5:8080 refused: orchestrator http://10.0.0.5:8080 (the fleet's own endpoint, always denied)
	// true destination 10.0.0.9:2379 refused: fleet endpoint https://10.0.0.9:2379 (the fleet's own endpoint, always denied)
	// false <nil>
	// false <nil>
}

// A Transport enforces a policy for any http.Client, as the orchestrators
// do for run notifications.
func ExampleNewTransport() {
	_, err := egress.NewTransport(egress.Policy{Allow: []string{"10.0.0.0/33"}})
	fmt.Println(errors.Is(err, egress.ErrInvalidPolicy))
	// Output: true
}
