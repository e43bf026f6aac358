package cursor_test

import (
	"errors"
	"fmt"

	"github.com/jobfleet/jobfleet/internal/cursor"
)

func Example() {
	c, _ := cursor.New([]byte("the fleet's cursor key, from etcd"))
	paused := cursor.Listing{Kind: "jobs", Params: []string{"billing/", "paused=true"}}
	next := c.Seal(paused, "00017/billing%2Finvoice")

	pos, err := c.Open(paused, next)
	fmt.Println(pos, err)
	_, err = c.Open(cursor.Listing{Kind: "jobs", Params: []string{"billing/", "paused=false"}}, next)
	fmt.Println(errors.Is(err, cursor.ErrOtherListing))
	_, err = c.Open(paused, "00017/billing%2Finvoice")
	fmt.Println(err)
	// Output:
	// 00017/billing%2Finvoice <nil>
	// true
	// not a cursor of this listing: malformed
}
