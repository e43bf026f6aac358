package auth_test

import (
	"fmt"

	"github.com/jobfleet/jobfleet/api"

	"github.com/jobfleet/jobfleet/auth"
)

// A billing operator may change billing jobs, read the cluster, and
// nothing more.
func ExampleAuthorize() {
	p := auth.Principal{ID: "3f9a1c7e0b2d", Role: api.RoleOperator, Prefix: "billing/"}
	fmt.Println(auth.Authorize(p, api.AccessWrite, "billing/invoices", true))
	fmt.Println(auth.Authorize(p, api.AccessWrite, "payroll/monthly", true))
	fmt.Println(auth.Authorize(p, api.AccessRead, "", false))
	fmt.Println(auth.Authorize(p, api.AccessAdmin, "", false))
	// Output:
	// <nil>
	// forbidden: credential "3f9a1c7e0b2d" is limited to jobs whose ID starts with "billing/"
	// <nil>
	// forbidden: credential "3f9a1c7e0b2d" (role operator) may not do this (needs role admin)
}

func ExampleParseToken() {
	tok := auth.FormatToken("dev-admin", "hd8dK2mPq0aZ1xYt7uVwE3rS9fGhJkL4nBcX5vN6mQe")
	id, _, err := auth.ParseToken(tok)
	fmt.Println(id, err)
	// Output: dev-admin <nil>
}
