package main

import (
	"context"

	"github.com/jobfleet/jobfleet/client"
)

// readPages reads every page of a listing within prefix (and the
// credential's), 1000 items a page, in the listing's order: read answers
// the page that o asks for with its items and the next page's cursor ("" on
// the last). It stops at the first error.
func readPages[T any](ctx context.Context, prefix string, read func(ctx context.Context, o client.ListOptions) ([]T, string, error)) ([]T, error) {
	all := []T{}
	o := client.ListOptions{Limit: 1000, Prefix: prefix}
	for {
		items, next, err := read(ctx, o)
		if err != nil {
			return all, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		o.Cursor = next
	}
}
